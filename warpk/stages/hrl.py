"""`stage=hrl` (M5): GRPO kernel rounds and PPO runtime rounds; kernels change the serving cost model.

    python -m warpk stage=hrl model=m5 policy=tiny                       # ~3 min on a 2-core CPU
    python -m warpk stage=hrl model=m5 runtime.kernel_records=docs/data/h200_bundled_suite_records.jsonl

Rounds r = 1 .. runtime.hrl_rounds:
  1. GRPO round (runtime.hrl_grpo): the kernel policy trains `runtime.hrl_grpo_steps` more steps
     (warpk.trainers.grpo, resumed from <run_dir>/grpo), then writes k samples for every bundled
     task of a served op class; they are evaluated (<run_dir>/grpo/round<r>_records.jsonl).
  2. Deployment: per op class, the fastest correct candidate so far (policy rounds and
     runtime.kernel_records) beating the reference (warpk.runtime.hrl); only records measured on
     the served GPU (hardware@runtime.served) count. Amdahl over MODELLED op-class shares gives the cost
     model's multipliers; the M5 env takes them.
  3. PPO round: the M5 controller trains `runtime.hrl_ppo_timesteps` more steps on that env.
Joint fine-tuning: a last PPO round of `runtime.hrl_joint_timesteps` on the final cost model (all
kernels found, every round's). M4 alone: the same PPO, seed and steps on the unchanged env.
Both are evaluated on the held-out seeds of stage=runtime; the gain is paired by seed (95% t).

Writes runtime_results.jsonl (stage=runtime's format: policies "M4 PPO", "M5 PPO (kernel-updated
env)" and static max on both envs), hrl_kernels.json and hrl_results.md. Every serving number is
SIMULATED; op-class shares and the task-to-served-op transfer are MODELLED.

Non-goals: the GRPO reward does not see the serving env (the coupling is kernels -> env); no
NVML actuator here.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from warpk.config import RunConfig
from warpk.paths import from_repo
from warpk.progress import progress
from warpk.records import EvalRecord, read_records
from warpk.runtime import baselines, hrl
from warpk.runtime.calibration import CalibrationError, PhaseScale, load_calibration
from warpk.runtime.env import ServingEnv, calibration_path, reward_weights
from warpk.runtime.evaluation import METRICS, caption, evaluate, evaluation_seeds, mean_ci95, summarize
from warpk.runtime.ppo import PPOPolicy, hyperparameters, new_ppo

M4, M5 = "M4 PPO", "M5 PPO (kernel-updated env)"
NO_KERNEL = "no correct kernel from the policy: cost model unchanged"


def learn(model, timesteps: int, seed: int) -> None:
    """Continue training: no env reset, the step counter goes on (rounds of whole rollouts).

    The global torch/numpy RNGs are re-seeded first: GRPO rounds and the other arm's PPO consume
    them in between, and M4 and M5 must see the same random stream (identical envs -> identical
    policies, so any gain comes from the kernels)."""
    if timesteps > 0:
        model.set_random_seed(seed)
        model.learn(total_timesteps=timesteps, reset_num_timesteps=False)


def served_tasks(config: RunConfig):
    from warpk.tasks import load_suite

    tasks = load_suite(dataclasses.replace(config.tasks, split="all", subset=[]))
    return [t for t in tasks if hrl.op_class(t.task_id) is not None]


def grpo_round(config: RunConfig, run_dir: Path, r: int, log) -> list[EvalRecord]:
    """Train the kernel policy one more round, then evaluate its samples on the served op tasks."""
    from warpk.trainers.common import build_evaluator
    from warpk.trainers.grpo import run_grpo
    from warpk.trainers.sample import evaluate_policy

    rt = config.runtime
    cfg = dataclasses.replace(
        config, train=dataclasses.replace(config.train, max_steps=r * rt.hrl_grpo_steps, heldout_eval=False)
    )
    out = run_dir / "grpo"
    trainer, summary = run_grpo(cfg, out, log)
    tasks = served_tasks(cfg)
    if not tasks:
        return []
    records, metrics = evaluate_policy(
        trainer.model,
        trainer.processing_class,
        tasks,
        build_evaluator(cfg),
        k=cfg.train.samples_per_task,
        max_new_tokens=cfg.policy.max_new_tokens,
        temperature=cfg.policy.temperature,
        hardware=cfg.hardware.name,
        seed=cfg.seed + r,
        records_path=out / f"round{r}_records.jsonl",
    )
    log({f"hrl/grpo_round{r}/{k}": v for k, v in metrics.items() if isinstance(v, int | float)})
    return records


def file_records(config: RunConfig) -> tuple[list[EvalRecord], list[str]]:
    """runtime.kernel_records: measured records on the served GPU; refused (exit) if it has none."""
    rt = config.runtime
    if not rt.kernel_records:
        return [], []
    path = from_repo(rt.kernel_records)
    if not path.is_file():
        sys.exit(f"warpk: runtime.kernel_records={rt.kernel_records}: no such file")
    try:
        records = read_records(path)
    except ValueError as err:
        sys.exit(f"warpk: runtime.kernel_records: {err}")
    keep, notes = hrl.usable(records, rt.served.name)
    if not keep:
        found = sorted({str(r.hardware) for r in records}) or ["nothing"]
        sys.exit(
            f"warpk: runtime.kernel_records={rt.kernel_records} holds records of {', '.join(found)}, "
            f"none measured on the served GPU hardware@runtime.served={rt.served.name}: refused"
        )
    return keep, notes


def run_hrl(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """M5 rounds, M4 alone with the same PPO budget, the gain table; returns the summary metrics."""
    rt, sla = config.runtime, config.sla
    run_dir = Path(run_dir)
    console = Console(width=None if Console().is_terminal else 160)
    try:
        cal = load_calibration(calibration_path(config), allow_fixture=rt.allow_fixture_calibration)
    except CalibrationError as err:
        sys.exit(f"warpk: {err}")
    if "Qwen2.5-7B" not in cal.model:
        sys.exit(f"warpk: stage=hrl models op-class shares of Qwen2.5-7B; the calibration is of {cal.model}")
    gpu = rt.served
    shares = hrl.phase_shares(rt, gpu)
    from_file, notes = file_records(config)
    sources: dict[str, list[EvalRecord]] = {"records file": from_file} if from_file else {}
    weights = reward_weights(config)
    m4_env, m5_env = ServingEnv(rt, sla, gpu, cal, **weights), ServingEnv(rt, sla, gpu, cal, **weights)
    hyper = hyperparameters(rt)
    m4_model, m5_model = new_ppo(m4_env, config.seed, hyper=hyper), new_ppo(m5_env, config.seed, hyper=hyper)
    policy_ok = 0
    scale = PhaseScale()
    kernels = hrl.choose_kernels(sources, rt.deploy_margin)
    total = 2 * (rt.hrl_rounds * rt.hrl_ppo_timesteps + rt.hrl_joint_timesteps)  # M5's and M4's
    with progress(console, "M5 rounds (PPO steps of M5 and M4)", total, log, key="hrl_rounds") as update:
        done = 0
        for r in range(1, rt.hrl_rounds + 1):
            if rt.hrl_grpo:
                update(done, f"round {r}: GRPO ({rt.hrl_grpo_steps} steps) and sampling")
                records = grpo_round(config, run_dir, r, log)
                policy_ok += sum(x.status == "ok" for x in records)
                on_gpu, left_out = hrl.usable(records, rt.served.name)
                notes += [f"policy round {r}: {n}" for n in left_out]
                sources[f"policy round {r}"] = on_gpu
                console.print(
                    f"round {r}: GRPO policy wrote {len(records)} candidates for {len(served_tasks(config))} "
                    f"served-op tasks, {sum(x.status == 'ok' for x in records)} correct"
                )
            kernels = hrl.choose_kernels(sources, rt.deploy_margin)
            scale = hrl.kernel_scale(kernels, shares)
            m5_env.set_kernel_scale(scale)
            log({f"hrl/round{r}/{k}": v for k, v in hrl.scale_dict(scale).items()})
            for model in (m5_model, m4_model):
                update(done, f"round {r}: PPO {rt.hrl_ppo_timesteps} steps")
                learn(model, rt.hrl_ppo_timesteps, config.seed + 1000 * r)
                done += rt.hrl_ppo_timesteps
        for model in (m5_model, m4_model):
            update(done, f"joint: PPO {rt.hrl_joint_timesteps} steps on the final cost model")
            learn(model, rt.hrl_joint_timesteps, config.seed + 999)
            done += rt.hrl_joint_timesteps
        update(done)
    hrl.write_kernels(run_dir / "hrl_kernels.json", kernels, scale, shares)

    seeds = evaluation_seeds(config)
    runs = [
        (M4, m4_env, PPOPolicy(m4_model, name=M4), "adaptive"),
        (M5, m5_env, PPOPolicy(m5_model, name=M5), "adaptive"),
    ]
    static = baselines.static_max(m4_env)
    label = m4_env.setting(static.action).label
    runs += [
        ("static max", m4_env, static, label),
        ("static max (kernel-updated env)", m5_env, static, label),
    ]
    per_seed, summaries = {}, {}
    with (
        console.status("evaluating on the held-out seeds"),
        (run_dir / "runtime_results.jsonl").open("w") as sink,
    ):
        for name, env, policy, setting in runs:
            results = evaluate(env, policy, seeds)
            for x in results:
                sink.write(json.dumps({"policy": name, "setting": setting, **asdict(x)}) + "\n")
            summaries[name] = summarize(name, setting, results)
            sink.write(json.dumps({"summary": True, **summaries[name].to_dict()}) + "\n")
            per_seed[name] = results

    out = _summary(per_seed, summaries, scale, kernels, sources, policy_ok)
    out["hrl/ppo_timesteps_each"] = rt.hrl_rounds * rt.hrl_ppo_timesteps + rt.hrl_joint_timesteps
    log({k: v for k, v in out.items() if isinstance(v, int | float) and not isinstance(v, bool)})
    note = caption(sla.name, sla.ttft_p95_s, sla.e2e_p95_s, Path(cal.path).name, rt.evaluate_on)
    kernel_t, gain_t = kernel_table(kernels, shares, scale), gain_table(summaries, out)
    console.print(kernel_t)
    for n in notes:
        console.print(f"[yellow]{n}[/yellow]")
    console.print(out["kernel_source"])
    console.print(gain_t)
    console.print(note)
    (run_dir / "hrl_results.md").write_text(_markdown(kernel_t, gain_t, [*notes, out["kernel_source"], note]))
    console.print(f"results: {run_dir / 'hrl_results.md'}")
    return out


def _summary(per_seed, summaries, scale, kernels, sources, policy_ok: int) -> dict:
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


def _pm(mean: float, half: float, spec: str) -> str:
    return format(mean, spec) + ("" if half != half else " ± " + format(half, spec.lstrip("+")))


def kernel_table(kernels, shares, scale: PhaseScale) -> Table:
    t = Table(title="M5 kernel multipliers per op class (shares MODELLED: roofline of Qwen2.5-7B)")
    for h in (
        "op class",
        "prefill share",
        "decode share",
        "speedup",
        "energy ratio",
        "energy",
        "deployed (source)",
    ):
        t.add_column(h, overflow="fold")
    for c, k in kernels.items():
        t.add_row(
            c,
            f"{shares['prefill'][c]:.3f}",
            f"{shares['decode'][c]:.3f}",
            f"{k.speedup:.3f}",
            f"{k.energy_ratio:.3f}",
            k.energy_note,
            ", ".join(k.deployed) or "reference (none)",
        )
    s = scale
    t.caption = (
        f"cost model x: prefill time {s.prefill_time:.4f}, energy {s.prefill_energy:.4f}; decode time "
        f"{s.decode_time:.4f}, energy {s.decode_energy:.4f}. Task speedups are against plain-PyTorch "
        "references, not the served model's library kernels: the transfer is MODELLED."
    )
    return t


def gain_table(summaries, out: dict) -> Table:
    t = Table(title="M5 (kernel-updated env) versus M4 alone (unchanged env), same held-out seeds")
    for h in ("metric", "static max", "static max (kernel env)", M4, M5, "M5 vs M4 (paired)"):
        t.add_column(h, overflow="fold")
    spec = {"energy_per_request_j": ".1f", "ttft_p95_s": ".2f", "e2e_p95_s": ".1f", "sla_attainment": ".3f",
            "throughput_rps": ".2f"}  # fmt: skip
    for m in METRICS:
        cells = [_pm(getattr(summaries[n], m), getattr(summaries[n], f"{m}_ci95"), spec[m])
                 for n in ("static max", "static max (kernel-updated env)", M4, M5)]  # fmt: skip
        paired = ""
        if m == "energy_per_request_j":
            paired = "saving " + _pm(out["m5_energy_saving_vs_m4"], out["m5_energy_saving_vs_m4_ci95"], ".1%")
        if m == "sla_attainment":
            paired = _pm(out["m5_sla_attainment_minus_m4"], out["m5_sla_attainment_minus_m4_ci95"], "+.3f")
        t.add_row(m, *cells, paired)
    return t


def _markdown(*parts) -> str:
    kernel_t, gain_t, notes = parts
    lines = []
    for t in (kernel_t, gain_t):
        heads = [c.header for c in t.columns]
        rows = list(zip(*[list(c.cells) for c in t.columns], strict=True))
        lines += [f"### {t.title}", "", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
        lines += ["", str(t.caption or ""), ""]
    return "\n".join(lines + list(notes)) + "\n"
