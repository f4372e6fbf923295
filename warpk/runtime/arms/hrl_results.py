"""What `stage=hrl` reports: the summary metrics, the kernel and gain tables, their Markdown.

Every serving number is SIMULATED; op-class shares and the task-to-served-op transfer are
MODELLED (warpk.runtime.arms.hrl); the tables say so.

Non-goals: no evaluation or training here.
"""

from __future__ import annotations

from warpk.runtime.arms import hrl
from warpk.runtime.arms.tables import plus_minus, pm
from warpk.runtime.control.evaluation import METRICS, mean_ci95
from warpk.runtime.serving.calibration import PhaseScale
from warpk.tables import Table, num, text, to_markdown

M4, M5 = "M4 PPO", "M5 PPO (kernel-updated env)"
NO_KERNEL = "no correct kernel from the policy: cost model unchanged"


def hrl_summary(per_seed, summaries, scale, kernels, sources, policy_ok: int) -> dict:
    src = [k for k, v in sources.items() if any(r.status == "ok" for r in v)]
    if hrl.is_identity(scale):
        why = NO_KERNEL if policy_ok == 0 else "no correct kernel faster than its reference on the served GPU"
        kernel_source = why + (" (records file: none faster either)" if "records file" in sources else "")
    else:
        kernel_source = (
            "kernels from: " + ", ".join(src) + ("" if policy_ok else f"; {NO_KERNEL.split(':')[0]}")
        )
    out: dict = {
        "energy_source": "simulated (measured cost fit + modelled cap/clock; modelled op-class shares)",
        "kernel_source": kernel_source,
        "policy_correct_kernels": policy_ok,
    }
    for k, v in hrl.scale_dict(scale).items():
        out[f"kernel_scale/{k}"] = v
    for c, k in kernels.items():
        out[f"kernels/{c}/speedup"], out[f"kernels/{c}/energy_ratio"] = k.speedup, k.energy_ratio
    for name, slug in ((M4, "m4_ppo"), (M5, "m5_ppo")):
        for m in METRICS:
            out[f"{slug}/{m}"] = getattr(summaries[name], m)
            out[f"{slug}/{m}_ci95"] = getattr(summaries[name], f"{m}_ci95")
    pairs = list(zip(per_seed[M4], per_seed[M5], strict=True))
    saving = [1.0 - b.energy_per_request_j / a.energy_per_request_j for a, b in pairs]
    out["m5_energy_saving_vs_m4"], out["m5_energy_saving_vs_m4_ci95"] = mean_ci95(saving)
    diff = [b.sla_attainment - a.sla_attainment for a, b in pairs]
    out["m5_sla_attainment_minus_m4"], out["m5_sla_attainment_minus_m4_ci95"] = mean_ci95(diff)
    return out


def kernel_table(kernels, shares, scale: PhaseScale) -> Table:
    s = scale
    t = Table("hrl_kernels", "M5 kernel multipliers per op class (shares MODELLED: roofline of Qwen2.5-7B)",
              ["op class", "prefill share", "decode share", "speedup", "energy ratio", "energy",
               "deployed (source)"],
              notes=[f"cost model x: prefill time {s.prefill_time:.4f}, energy {s.prefill_energy:.4f}; "
                     f"decode time {s.decode_time:.4f}, energy {s.decode_energy:.4f}. Task speedups are "
                     "against plain-PyTorch references, not the served model's library kernels: the "
                     "transfer is MODELLED."])  # fmt: skip
    for c, k in kernels.items():
        t.add(
            text(c),
            num(shares["prefill"][c], (), ".3f"),
            num(shares["decode"][c], (), ".3f"),
            num(k.speedup, (), ".3f"),
            num(k.energy_ratio, (), ".3f"),
            text(k.energy_note),
            text(", ".join(k.deployed) or "reference (none)"),
        )
    return t


def gain_table(summaries, out: dict) -> Table:
    t = Table("hrl_gain", "M5 (kernel-updated env) versus M4 alone (unchanged env), same held-out seeds",
              ["metric", "static max", "static max (kernel env)", M4, M5, "M5 vs M4 (paired)"])
    spec = {"energy_per_request_j": ".1f", "ttft_p95_s": ".2f", "e2e_p95_s": ".1f", "sla_attainment": ".3f",
            "throughput_rps": ".2f"}  # fmt: skip
    for m in METRICS:
        cells = [pm(getattr(summaries[n], m), getattr(summaries[n], f"{m}_ci95"), spec[m])
                 for n in ("static max", "static max (kernel-updated env)", M4, M5)]  # fmt: skip
        paired = text("")
        if m == "energy_per_request_j":
            saving = out["m5_energy_saving_vs_m4"], out["m5_energy_saving_vs_m4_ci95"]
            paired = text("saving " + plus_minus(*saving, ".1%"))
        if m == "sla_attainment":
            paired = pm(out["m5_sla_attainment_minus_m4"], out["m5_sla_attainment_minus_m4_ci95"], "+.3f")
        t.add(text(m), *cells, paired)
    return t


def markdown(kernel_t: Table, gain_t: Table, notes: list[str]) -> str:
    return "\n".join([to_markdown(kernel_t), to_markdown(gain_t), *notes]) + "\n"
