"""M5: how measured kernel results change the serving cost model (the high level of the hierarchy).

1. Op classes. Each bundled task that computes an op of the served model (Qwen2.5-7B: GQA causal
   attention with RoPE, RMSNorm, SwiGLU MLP, bf16 linear layers) maps to one class: matmul,
   attention, norm or activation (`TASK_CLASS`, by task name). Tasks of ops the served model does
   not run (cross-entropy, conv1d, group norm, ...) map to none and never change the env.
2. Op-class shares of a serving step, per phase: MODELLED, never measured. A roofline of the
   architecture's FLOPs and bytes on the served GPU's datasheet peaks (`phase_shares`) at one
   representative point per phase (a prefill of the mean prompt; a decode step at the median
   concurrency with mean context). Energy shares are taken equal to time shares (MODELLED: equal
   power across op classes).
3. Deployment (the high-level choice, a fixed rule: nothing here learns): per task, the fastest
   CORRECT (status ok) candidate on the served GPU is deployed if it is faster by the evaluator's
   one rule (`warpk.records.faster`: the low end of its speedup interval above 1 +
   SPEED_BIAS_MARGIN, which covers the two processes' bias as well as noise), else the reference
   stays. Tasks whose op the served model already
   runs as a fused library kernel (`SERVED_FUSED`: attention through SDPA) are never deployed: their
   reference is naive PyTorch, so beating it says nothing about beating what is served. A class's
   speedup is the geometric mean over its tasks present in the records (reference = 1).
   Its energy ratio (candidate / reference energy per call) is used only when every deployed
   candidate's energy was MEASURED (nvml or sampler); a modelled energy leaves the class's energy
   unchanged (speedup only, said in the output).
4. Amdahl per phase: time x (1 - sum f_c + sum f_c / s_c), energy x (1 - sum g_c + sum g_c r_c).

Caveat (printed): a bundled task's reference is plain PyTorch, not the fused library kernel the
calibrated model ran (SDPA, cuBLAS), so the transfer of a task speedup to the served step is
itself MODELLED: it shows the mechanism, not a deployable gain.

Non-goals: no training, no evaluation of candidates (the stage does both); no per-iteration
shares (one point per phase).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from warpk.config import HardwareConfig, RuntimeConfig
from warpk.records import EvalRecord, faster, geometric_mean
from warpk.runtime.serving.calibration import PhaseScale

OP_CLASSES = ("matmul", "attention", "norm", "activation")
MEASURED_ENERGY = ("nvml", "sampler")

# bundled task name -> op class of the served model (None: an op Qwen2.5-7B does not run)
TASK_CLASS: dict[str, str | None] = {
    "09_matmul": "matmul",
    "10_batched_matmul_bf16": "matmul",
    "08_swiglu_mlp": "matmul",  # Qwen's MLP: three GEMMs dominate, the SiLU-mul is a small part
    "07_attention": "attention",
    "17_causal_attention": "attention",
    "21_scale_mask_softmax": "attention",  # the softmax of attention scores
    "18_rope_qk": "attention",  # rotary embedding of q and k, inside the attention block
    "04_rms_norm": "norm",
    "19_fused_add_rms_norm_bf16": "norm",  # residual add + RMSNorm, as between Qwen's blocks
    "23_geglu": "activation",  # gated activation of the MLP halves (Qwen gates with SiLU)
    "03_gelu_tanh": "activation",
}


# Bundled tasks whose op the served model runs as a fused library kernel, and that kernel. Their
# references are plain PyTorch (naive attention), so a speedup over them earns no credit.
SERVED_FUSED = {
    "07_attention": "SDPA",
    "17_causal_attention": "SDPA",
    "21_scale_mask_softmax": "SDPA",  # inside SDPA in the served model
}


def beats_reference(record: EvalRecord) -> bool:
    """A correct record faster than its reference by the evaluator's rule (records.faster)."""
    return record.status == "ok" and bool(record.speedup) and faster(record)


def op_class(task_id: str) -> str | None:
    """The op class of a task id such as 'bundled/04_rms_norm' (None: not an op of the served model)."""
    return TASK_CLASS.get(task_id.rsplit("/", 1)[-1])


# Qwen2.5-7B architecture (its config.json): the calibrated model of warpk/runtime/serving/data/.
QWEN25_7B = dict(layers=28, hidden=3584, intermediate=18944, heads=28, kv_heads=4, head_dim=128, vocab=152064)
BYTES = 2  # bf16


def _roofline_s(flops: float, nbytes: float, hw: HardwareConfig) -> float:
    return max(flops / (hw.peak_bf16_tflops * 1e12), nbytes / (hw.mem_bandwidth_gb_s * 1e9))


def _gemm_s(rows: float, k: int, n: int, hw: HardwareConfig) -> float:
    return _roofline_s(2.0 * rows * k * n, BYTES * (k * n + rows * k + rows * n), hw)


def step_times_s(tokens: int, seqs: int, context: float, causal_prefill: bool, hw: HardwareConfig) -> dict:
    """MODELLED roofline seconds per op class (+ other) of one forward step of Qwen2.5-7B.

    tokens: rows through the layers (prompt tokens in prefill, batch in decode); seqs: sequences
    (logits rows); context: keys each query attends to (decode), ignored in a causal prefill.
    """
    a = QWEN25_7B
    h, i, kv = a["hidden"], a["intermediate"], a["kv_heads"] * a["head_dim"]
    t = dict.fromkeys((*OP_CLASSES, "other"), 0.0)
    layer_mm = sum(
        _gemm_s(tokens, k, n, hw) for k, n in ((h, h), (h, kv), (h, kv), (h, h), (h, i), (h, i), (i, h))
    )
    t["matmul"] = a["layers"] * layer_mm + _gemm_s(seqs, h, a["vocab"], hw)
    if causal_prefill:
        pairs = tokens * (tokens + 1) / 2
        kv_bytes = BYTES * 2 * tokens * kv
    else:
        pairs = tokens * context
        kv_bytes = BYTES * 2 * tokens * context * kv
    attn = _roofline_s(4.0 * a["heads"] * a["head_dim"] * pairs, kv_bytes + BYTES * 2 * tokens * h, hw)
    rope = _roofline_s(6.0 * tokens * (h + kv), BYTES * 2 * tokens * (h + kv), hw)
    t["attention"] = a["layers"] * (attn + rope)
    norm = _roofline_s(4.0 * tokens * h, BYTES * (2 * tokens * h + h), hw)
    t["norm"] = (2 * a["layers"] + 1) * norm
    t["activation"] = a["layers"] * _roofline_s(5.0 * tokens * i, BYTES * 3 * tokens * i, hw)
    t["other"] = a["layers"] * 2 * _roofline_s(tokens * h, BYTES * 3 * tokens * h, hw)  # residual adds
    t["other"] += _roofline_s(0.0, BYTES * 2 * tokens * h, hw)  # embedding gather
    return t


def _shares(times: dict) -> dict[str, float]:
    total = sum(times.values())
    return {c: times[c] / total for c in OP_CLASSES}


def phase_shares(runtime: RuntimeConfig, hw: HardwareConfig) -> dict[str, dict[str, float]]:
    """MODELLED share of each op class in the step time of each phase ({'prefill': {...}, 'decode': ...})."""
    prompt = int(round(runtime.workload.prompt_tokens_mean))
    batch = sorted(runtime.actuator.concurrency_choices)[len(runtime.actuator.concurrency_choices) // 2]
    context = runtime.workload.prompt_tokens_mean + runtime.workload.output_tokens_mean / 2
    return {
        "prefill": _shares(step_times_s(prompt, 1, 0.0, True, hw)),
        "decode": _shares(step_times_s(batch, batch, context, False, hw)),
    }


def amdahl(shares: dict[str, float], factors: dict[str, float], speedup: bool) -> float:
    """Multiplier of a phase's time (speedup=True: factors are speedups s_c, time x (1-f)+f/s) or
    energy (factors are energy ratios r_c, energy x (1-g)+g*r)."""
    out = 1.0
    for c, f in shares.items():
        x = factors.get(c, 1.0)
        out += f * ((1.0 / x) if speedup else x) - f
    return out


@dataclass(frozen=True)
class ClassKernel:
    """What is deployed for one op class, and where that came from."""

    op_class: str
    speedup: float  # geometric mean over the class's tasks in the records; 1.0 = reference kept
    energy_ratio: float  # candidate / reference energy per call; 1.0 when not measured
    deployed: tuple[str, ...]  # "task:candidate (source)" of each deployed candidate
    tasks_seen: int  # tasks of this class present in the records
    energy_note: (
        str  # "measured (nvml)", "not measured (model): speedup only", "reference kept", "no records"
    )


def usable(records: list[EvalRecord], gpu: str) -> tuple[list[EvalRecord], list[str]]:
    """Records measured on the served GPU profile, and one line per kind left out."""
    keep = [r for r in records if r.hardware == gpu]
    others = sorted({str(r.hardware) for r in records if r.hardware != gpu})
    counts = {h: sum(str(r.hardware) == h for r in records) for h in others}
    notes = [f"{n} records measured on {h}, not the served {gpu}: not used" for h, n in counts.items()]
    return keep, notes


def choose_kernels(sources: dict[str, list[EvalRecord]]) -> dict[str, ClassKernel]:
    """Per op class: deploy, per task, the fastest correct candidate faster than the reference
    (`beats_reference`); SERVED_FUSED tasks keep the served kernel.

    `sources` maps a label ("policy round 1", "records file") to records already on the served GPU.
    """
    best: dict[str, tuple[float, EvalRecord, str]] = {}  # task -> (speedup, record, source)
    seen: dict[str, set[str]] = {c: set() for c in OP_CLASSES}
    for label, records in sources.items():
        for r in records:
            c = op_class(r.task_id)
            if c is None:
                continue
            seen[c].add(r.task_id)
            if r.task_id.rsplit("/", 1)[-1] in SERVED_FUSED or not beats_reference(r):
                continue
            if r.task_id not in best or r.speedup > best[r.task_id][0]:
                best[r.task_id] = (r.speedup, r, label)
    out = {}
    for c in OP_CLASSES:
        chosen = [best[t] for t in sorted(seen[c]) if t in best]
        speedups = [best[t][0] if t in best else 1.0 for t in sorted(seen[c])]
        measured = all(
            r.energy_source in MEASURED_ENERGY and r.energy_j and r.ref_energy_j for _, r, _ in chosen
        )
        if not seen[c]:
            note, ratio = "no records", 1.0
        elif not chosen:
            note, ratio = "reference kept", 1.0
        elif measured:
            ratios = [
                best[t][1].energy_j / best[t][1].ref_energy_j if t in best else 1.0 for t in sorted(seen[c])
            ]
            ratio = geometric_mean(ratios)
            note = "measured (" + "+".join(sorted({r.energy_source for _, r, _ in chosen})) + ")"
        else:
            sources_e = "+".join(sorted({r.energy_source for _, r, _ in chosen}))
            note, ratio = f"not measured ({sources_e}): speedup only, energy unchanged", 1.0
        out[c] = ClassKernel(
            c,
            geometric_mean(speedups) if speedups else 1.0,
            ratio,
            tuple(f"{r.task_id.rsplit('/', 1)[-1]}:{r.candidate} ({label})" for _, r, label in chosen),
            len(seen[c]),
            note,
        )
    return out


def kernel_scale(kernels: dict[str, ClassKernel], shares: dict[str, dict[str, float]]) -> PhaseScale:
    """The cost model's multipliers from the deployed kernels (Amdahl over the MODELLED shares)."""
    speed = {c: k.speedup for c, k in kernels.items()}
    energy = {c: k.energy_ratio for c, k in kernels.items()}
    return PhaseScale(
        prefill_time=amdahl(shares["prefill"], speed, speedup=True),
        prefill_energy=amdahl(shares["prefill"], energy, speedup=False),
        decode_time=amdahl(shares["decode"], speed, speedup=True),
        decode_energy=amdahl(shares["decode"], energy, speedup=False),
    )


def is_identity(scale: PhaseScale) -> bool:
    return all(math.isclose(v, 1.0, rel_tol=0, abs_tol=0) for v in vars(scale).values())


def scale_dict(scale: PhaseScale) -> dict[str, float]:
    return dict(vars(scale))


def write_kernels(path: Path, kernels: dict[str, ClassKernel], scale: PhaseScale, shares: dict) -> None:
    doc = {
        "phase_shares_modelled": shares,
        "kernel_scale": scale_dict(scale),
        "classes": {c: vars(k) | {"deployed": list(k.deployed)} for c, k in kernels.items()},
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")
