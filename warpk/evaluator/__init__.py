"""The kernel evaluator: candidate source in, `EvalRecord` out. The reward source of WARP-K.

`Evaluator.evaluate_many(items)` for a batch of (task, candidate) items:
  1. each source is parsed and hashed once; the static pre-filter (warpk.evaluator.static)
     gives clear, cheap rejections (it is not the security boundary);
  2. the result cache (warpk.evaluator.cache): an identical (task, shape, candidate, hardware,
     protocol, software) was measured before -> its record, marked `cached`; duplicates inside
     the batch (common in a GRPO group) are measured once;
  3. dispatch (warpk.evaluator.dispatch): CUDA candidates are built by a pool of sandboxed
     compile workers on the CPU while one measuring lane per GPU (warpk.evaluator.lane)
     measures one candidate at a time: a trusted worker that never imports candidate code
     decides the verdict (warpk.evaluator.trusted), the candidate runs in a fresh sandboxed
     untrusted worker (warpk.evaluator.untrusted, warpk.evaluator.sandbox);
  4. records (warpk.evaluator.assemble): a runtime below the roofline floor is `implausible`.
A failure of the evaluator itself (the task's reference cannot be loaded, built or run, the
trusted worker died, an exception escaped a lane) is never a record: `evaluate_many` raises
HarnessFailure (warpk.evaluator.errors) and caches nothing of that item.
Energy (`evaluate.energy`, resolved once): `nvml` -> the trusted worker reads the GPU's NVML
counter while the reference and then the candidate run (warpk.evaluator.energy),
`energy_source="nvml"`; `sampler` -> the same counter from the sampler daemon's stream
(`energy_source="sampler"`) plus the lane's telemetry in `lane_*`; `auto` -> sampler where a
daemon serves this machine's GPUs, else nvml, on a GPU; a failed measurement leaves energy None
with `energy_error` saying why, never a modelled stand-in; `model` -> power model x measured
runtime, `energy_source="model"`; `none` -> no energy figures.

Non-goals here: trl, peft, wandb or hydra (workers re-import this package in fresh processes).
"""

from __future__ import annotations

import importlib

__all__ = ["EvalItem", "Evaluator", "HarnessFailure", "Prepared", "default_cache_dir", "source_sha"]


def __getattr__(name: str):
    """The package's front, loaded on first use (warpk.evaluator.api says why)."""
    if name in __all__:
        return getattr(importlib.import_module("warpk.evaluator.api"), name)
    raise AttributeError(f"module 'warpk.evaluator' has no attribute {name!r}")
