"""`stage=evaluate`: evaluate candidates on tasks, write records.jsonl, print the per-task table.

What is evaluated:
  - `evaluate.task_file` + `evaluate.candidate_files`: exactly those files, in that order;
  - otherwise the `tasks` suite with each task's bundled solutions (kernelbench/solutions/).

Records are appended to records.jsonl as they arrive, so an interrupted run keeps what it did.
A SLURM job that submitit requeued after a time limit or a preemption (SLURM_RESTART_COUNT > 0)
runs again in the same run dir and resumes: the records of its previous attempt are kept, only
the rest is evaluated.

With `policy.checkpoint=DIR` (a LoRA adapter written by stage=train) the candidates are
sampled from that policy instead: `train.samples_per_task` per task, pass@k reported.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from warpk.config import RunConfig
from warpk.evaluator import Evaluator
from warpk.evaluator.items import collect_items, previous_records, runnable
from warpk.progress import progress
from warpk.records import EvalRecord, OrderedSink, summarize
from warpk.report.console import results_table, summary_table
from warpk.tables import to_rich

LOGGED = ("speedup", "runtime_ms", "ref_runtime_ms", "energy_j", "ref_energy_j", "lane_power_mean_w",
          "lane_power_max_w", "lane_sm_clock_mean_mhz", "lane_temperature_max_c", "lane_throttle_reasons")


def evaluate_checkpoint(config: RunConfig, run_dir: Path, console: Console) -> dict:
    """policy.checkpoint=DIR: sample and evaluate the policy trained in DIR; print, return the summary."""
    from warpk.trainers.sample import evaluate_checkpoint as sample_and_evaluate

    records, summary = sample_and_evaluate(config, run_dir)
    k = config.train.samples_per_task
    console.print(to_rich(results_table(records, config.hardware.name)))
    console.print(to_rich(summary_table(summary)))
    console.print(f"pass@1={summary['pass_at_1']} pass@{k}={summary['pass_at_k']}")
    console.print(f"records: {run_dir / 'records.jsonl'}")
    return summary


def run_evaluate(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> dict:
    """Evaluate, write `records.jsonl` under `run_dir`, print tables; returns the summary."""
    console = Console(width=None if Console().is_terminal else 160)
    if config.policy.checkpoint:  # a trained policy: sample from it instead of candidate files
        return evaluate_checkpoint(config, run_dir, console)
    items, skipped = runnable(collect_items(config), config.hardware.device)
    if skipped:
        console.print(
            f"[yellow]skipped {len(skipped)} CUDA/Triton candidates: hardware="
            f"{config.hardware.name} has no GPU to run them[/yellow]"
        )
    evaluator = Evaluator(config.evaluate, config.hardware, config.tasks.shape, config.seed)
    if evaluator.energy == "sampler":
        console.print(f"energy: from the sampler daemon at {config.evaluate.sampler_addr} (NVML counter "
                      "windows, and each record's lane_* telemetry during its candidate's measurement)")
    elif evaluator.energy == "nvml" and config.evaluate.energy == "auto":
        console.print(f"energy: NVML read by the trusted worker (no usable sampler daemon at "
                      f"{config.evaluate.sampler_addr}, so no lane_* telemetry)")
    records_path = run_dir / "records.jsonl"
    # SLURM sets SLURM_RESTART_COUNT in a requeued job: the only case where this run dir already
    # holds this job's own records (a re-run into the same hydra.run.dir starts over).
    requeued = int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0
    records: list[EvalRecord] = previous_records(records_path, items) if requeued else []
    if requeued:
        console.print(
            f"resumed after requeue: {len(records)} of {len(items)} records kept from the last attempt"
        )
    done = len(records)
    with (
        records_path.open("w") as file,  # rewritten: a torn last line of a killed attempt goes
        progress(console, "evaluate", len(items), log, initial=done) as update,
    ):
        sink = OrderedSink(file, records)

        def on_record(index: int, record: EvalRecord) -> None:  # as records arrive, from lanes
            index += done
            sink.add(index, record)  # records.jsonl keeps the order of the items
            log(
                {
                    "eval/index": index,
                    "eval/ok": float(record.status == "ok"),
                    **{f"eval/{k}": getattr(record, k) for k in LOGGED if getattr(record, k) is not None},
                }
            )
            update(sink.arrived, f"{record.task_id} {record.candidate}: {record.status}")

        try:
            ordered = records[:done] + evaluator.evaluate_many(items[done:], on_record=on_record)
        finally:
            evaluator.close()  # its workers, kept warm for another call, are not needed any more
    summary = summarize(ordered)
    summary["n_skipped"] = float(len(skipped))
    summary["n_energy_error"] = float(sum(r.energy_error is not None for r in ordered))
    sources = sorted({r.energy_source for r in ordered if r.energy_j is not None})
    summary["energy_source"] = "+".join(sources) or "none"  # labels geomean_energy_ratio
    console.print(to_rich(results_table(ordered, config.hardware.name)))
    console.print(to_rich(summary_table(summary)))
    console.print(f"records: {records_path}")
    return summary
