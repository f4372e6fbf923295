"""Training on several GPUs of one node: `train.processes=N` runs the train stage as N processes.

    python -m warpk stage=train model=m1 policy=qwen2.5-coder-7b hardware=h100 train.processes=8

`python -m warpk` composes the config once, then (this module's `launch`) starts the stage again
as N processes under `torch.distributed.run --standalone`, with the job's own overrides and its
run dir. trl's trainers see the torchrun environment and train data-parallel through accelerate
(DDP; `nccl` on GPUs, `gloo` on the CPU). Each process generates and scores its share of every
batch: its evaluator measures on its own GPU only (`lanes`) with its share of the CPU cores for
builds. Rank 0 alone logs to W&B, writes the adapter's stamp and summary.json, and runs the
held-out evaluation; the parent waits for all of them and fails with one line if any fails.

On SLURM, one job per node with `gpus_per_node: N` (`hydra/launcher=slurm_h100_8gpu`) and
`train.processes=N`.

Non-goals: no multi-node training; no ZeRO/FSDP config of its own (accelerate's defaults).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE") or 1)


def rank() -> int:
    return int(os.environ.get("RANK") or 0)


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK") or 0)


def is_main() -> bool:
    """True in a single process and in rank 0 of a distributed run."""
    return rank() == 0


def needs_launch(processes: int) -> bool:
    """True in the process `python -m warpk` started, when the stage should run as `processes`."""
    return processes > 1 and "LOCAL_RANK" not in os.environ


def launch_command(processes: int, overrides: list[str], run_dir: Path) -> list[str]:
    """torchrun of `python -m warpk` with the job's overrides, all ranks in one run dir."""
    kept = [o for o in overrides if not o.lstrip("+~").startswith("hydra.run.dir=")]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
            "-m", "warpk", *kept, f"hydra.run.dir={run_dir}", "hydra.output_subdir=null"]


def launch(processes: int, overrides: list[str], run_dir: Path) -> int:
    """Run the stage as `processes` processes; their exit code (0 only when all succeeded)."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return subprocess.run(launch_command(processes, overrides, run_dir), env=env, check=False).returncode


def lanes(device: str) -> list[str] | None:
    """The measuring lanes of this process's evaluator: in a distributed run on GPUs, its own GPU
    (as a CUDA_VISIBLE_DEVICES value); None (the evaluator's default) otherwise."""
    if world_size() == 1 or device == "cpu":
        return None
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return [visible[local_rank()] if visible else str(local_rank())]


def summed(counts: dict[str, int]) -> dict[str, int]:
    """`counts` added up over all processes (each counts its own share of the completions)."""
    if world_size() == 1:
        return dict(counts)
    import torch.distributed as dist

    every: list = [None] * world_size()
    dist.all_gather_object(every, dict(counts))
    total: dict[str, int] = {}
    for part in every:
        for name, n in part.items():
            total[name] = total.get(name, 0) + n
    return total


def compile_workers(default: int) -> int:
    """This process's share of the node's CUDA-build workers."""
    return max(1, default // world_size())
