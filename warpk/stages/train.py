"""`stage=train`: M0 SFT or M1-M3 GRPO on the train split, then the held-out evaluation.

    python -m warpk stage=train model=m2 policy=tiny      # a couple of minutes on a 2-core CPU

The run dir receives checkpoints/ (resumable: a restarted run continues from the latest),
adapter/ (the final LoRA adapter + warpk_policy.json), records.jsonl (the trained policy's
k samples per held-out task, evaluated) and, through __main__, summary.json holding the
training metrics and the held-out metrics (compile_rate, correct_rate, fast_1, pass_at_1,
pass_at_k, geomean_speedup, energy_ratio, energy_source).

Non-goals: M4/M5 (stage=runtime / hrl); no hyper-parameter search.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from warpk.config import RunConfig
from warpk.report.console import results_table, summary_table
from warpk.tables import Table, num, text, to_rich
from warpk.trainers import distributed

HELDOUT_KEYS = (
    "compile_rate",
    "correct_rate",
    "fast_1",
    "pass_at_1",
    "pass_at_k",
    "geomean_speedup",
    "energy_ratio",
)


def train_table(summary: dict) -> Table:
    table = Table("training", "Training", ["metric", "value"], show_header=False)
    for key in ("global_step", "train/train_runtime", "train/loss", "train/reward", "train/completions"):
        if summary.get(key) is not None:
            table.add(text(key), num(summary[key], (), ".4g"))
    return table


def heldout_evaluation(config: RunConfig, model, tokenizer, run_dir: Path, console: Console) -> dict:
    """Sample + evaluate the trained policy on the held-out split; writes records.jsonl."""
    from warpk.trainers.common import build_evaluator
    from warpk.trainers.data import heldout_tasks
    from warpk.trainers.sample import evaluate_policy

    tasks = heldout_tasks(config)
    if not tasks:
        console.print("[yellow]no held-out tasks in this suite: nothing evaluated[/yellow]")
        return {}
    records, summary = evaluate_policy(
        model,
        tokenizer,
        tasks,
        build_evaluator(config),
        k=config.train.samples_per_task,
        max_new_tokens=config.policy.max_new_tokens,
        temperature=config.policy.temperature,
        hardware=config.hardware.name,
        seed=config.seed,
        records_path=run_dir / "records.jsonl",
        turns=config.model.turns,
    )
    console.print(to_rich(results_table(records, config.hardware.name)))
    console.print(to_rich(summary_table(summary)))
    k = config.train.samples_per_task
    label = " (MODELLED energy)" if summary["energy_source"] == "model" else ""
    console.print(
        f"held-out: pass@1={_pct(summary['pass_at_1'])} pass@{k}={_pct(summary['pass_at_k'])} "
        f"energy_ratio={summary['energy_ratio']}{label}"
    )
    return summary


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run_train(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """Train the arm's policy, evaluate it on the held-out split; returns the summary."""
    console = Console(width=None if Console().is_terminal else 160)
    run_dir = Path(run_dir)
    trainer_kind = config.model.trainer  # sft or grpo: RunConfig.check refuses any other at preflight
    if distributed.world_size() > 1:
        print(f"training process {distributed.rank() + 1} of {distributed.world_size()}", flush=True)
    start = time.perf_counter()
    if trainer_kind == "sft":
        from warpk.trainers.sft import run_sft as run
    else:
        from warpk.trainers.grpo import run_grpo as run
    trainer, summary = run(config, run_dir, log)
    summary["train_wall_s"] = time.perf_counter() - start
    console.print(to_rich(train_table(summary)))
    if config.train.heldout_eval and distributed.is_main():  # one evaluation, not one per process
        model = trainer.model
        heldout = heldout_evaluation(config, model, trainer.processing_class, run_dir, console)
        summary.update(heldout)
        log({f"heldout/{k}": heldout[k] for k in HELDOUT_KEYS if heldout.get(k) is not None})
    console.print(f"adapter: {run_dir / 'adapter'}  checkpoints: {run_dir / 'checkpoints'}")
    return summary
