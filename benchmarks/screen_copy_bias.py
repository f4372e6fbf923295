"""Why a copy of the reference comes out slower or faster than the reference: the same problems
under lane variants, side by side, with each side's timed round trip split into its steps.

A reference renamed `ModelNew` is exactly as fast as the reference, so its speedup is the timing's
bias. This runs chosen problems (upstream KernelBench by `--root`, or `--bundled`) once per
variant, each variant with an Evaluator of its own (fresh lanes), and WARPK_PROFILE set, so the
trusted worker logs every Go's steps on its own clock (warpk.evaluator.link: `answer` = from
sending the Go to holding the answer, `freeze` = the worker confirmed still, `read back` =
copies of its outputs here) for the candidate and for the reference worker.

Variants change only where the lane's processes run (a screen, in this process: the trusted
worker and the sandboxes are the real ones):
  default    the lane's cores as configured (`resources.lane_cores`: num_threads cores)
  no-cpuset  no cpuset for the candidate and the reference worker (any core)
  cores-4    4 cores for the lane
  no-spare   no worker started ahead for the next candidate
  spare-on-lane  the worker started ahead is born on the lane's cores (not the trusted worker's)
  device-<N>m  batches that move N MiB or more travel in device memory (default 128;
             an exported WARPK_DEVICE_MEMORY_BYTES is replaced by each variant's)
  no-memory-max  no effective memory.max for the candidate's and the reference worker's cgroups
             (and RSS watch): memory_limit_gb 10^6 in their Limits

    python benchmarks/screen_copy_bias.py --root KB/KernelBench --level 2 \
        --subset 63_Gemm_ReLU_Divide 62_Matmul_GroupNorm_LeakyReLU_Sum --variants default no-cpuset \
        --out outputs/screen

Prints one line per problem and variant (speedup, interval, per call ms of each step per side) and
writes screen.json. A diagnostic: nothing here reaches a record or a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from kernelbench_refcheck import as_candidate, hardware  # noqa: E402

from warpk.config import EvaluateConfig, TasksConfig  # noqa: E402
from warpk.evaluator import EvalItem, Evaluator, dispatch, lane, resources  # noqa: E402
from warpk.evaluator.identity import own_folder  # noqa: E402
from warpk.evaluator.sandbox import UntrustedProcess  # noqa: E402
from warpk.tasks import load_suite  # noqa: E402

STEPS = ("answer", "freeze", "read back")


def _worker_without_spare(self, build_dir):
    if build_dir is not None:
        own_folder(build_dir, self.sandbox)  # nobody's where the sandbox drops (identity.py)
    env = self._untrusted_env(build_dir)
    return UntrustedProcess(self.sandbox, None, self.limits, env, build_dir, self.gpu)


def _init_spare_on_lane(self, gpu, sandbox, limits, env, free_cores=()):
    ORIGINAL_INIT(self, gpu, sandbox, limits, env, free_cores)
    self.spare_limits = limits


def _limits_without_memory(memory_limit_gb, *args, **kwargs):
    return ORIGINAL_LIMITS(1e6, *args, **kwargs)  # 0 would read as a limit of 0 GB to the RSS watch


def apply(variant: str) -> None:
    """Patch this process for `variant` (undone by the next call)."""
    dispatch.lane_cores = resources.lane_cores
    lane.Lane._worker = ORIGINAL_WORKER
    lane.Lane.__init__ = ORIGINAL_INIT
    dispatch.Limits = ORIGINAL_LIMITS
    os.environ.pop("WARPK_DEVICE_MEMORY_BYTES", None)
    if variant == "no-cpuset":
        dispatch.lane_cores = lambda index, threads: ()
    elif variant == "cores-4":
        dispatch.lane_cores = lambda index, threads: resources.lane_cores(index, 4)
    elif variant == "no-spare":
        lane.Lane._worker = _worker_without_spare
    elif variant == "spare-on-lane":
        lane.Lane.__init__ = _init_spare_on_lane
    elif variant == "no-memory-max":
        dispatch.Limits = _limits_without_memory
    elif variant.startswith("device-") and variant.endswith("m") and variant[7:-1].isdigit():
        os.environ["WARPK_DEVICE_MEMORY_BYTES"] = str(int(variant[7:-1]) << 20)
    elif variant != "default":
        raise SystemExit(f"unknown variant {variant!r}: default, no-cpuset, cores-4, no-spare, "
                         "spare-on-lane, device-<N>m, no-memory-max")


ORIGINAL_WORKER = lane.Lane._worker
ORIGINAL_INIT = lane.Lane.__init__
ORIGINAL_LIMITS = dispatch.Limits


def per_call_ms(go: dict, phase: str) -> dict:
    """{step: ms per call} of one side's Go's in `phase`."""
    phases, counts = go
    calls = counts.get(f"{phase}: calls", 0)
    if not calls:
        return {}
    return {step: 1e3 * phases.get(f"{phase}: {step}", 0.0) / calls for step in STEPS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", help="upstream KernelBench/KernelBench")
    parser.add_argument("--bundled", action="store_true")
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--subset", nargs="+", required=True, help="problem names (file stems)")
    parser.add_argument("--variants", nargs="+", default=["default", "no-cpuset", "cores-4", "no-spare"])
    parser.add_argument("--hardware", default="auto")
    parser.add_argument("--timing-batches", type=int, default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for variant in args.variants:
        apply(variant)  # refuses an unknown one before anything runs
    apply("default")
    hw = hardware(args.hardware)
    suite = (TasksConfig(source="bundled", subset=args.subset) if args.bundled else
             TasksConfig(source="kernelbench", root=args.root, level=args.level, subset=args.subset))
    tasks = load_suite(suite)
    items = [EvalItem(t, as_candidate(t.path.read_text()), "reference_as_candidate") for t in tasks]
    extra = {"timing_batches": args.timing_batches} if args.timing_batches else {}
    rows = []
    for variant in args.variants:
        apply(variant)
        profile = args.out / f"profile-{variant}.jsonl"
        profile.unlink(missing_ok=True)
        os.environ["WARPK_PROFILE"] = str(profile)
        start = time.perf_counter()
        protocol = EvaluateConfig(energy="none", result_cache=False, **extra)
        with Evaluator(protocol, hw, shape="auto") as ev:
            records = ev.evaluate_many(items)
        wall_s = time.perf_counter() - start
        lines = [json.loads(x) for x in profile.read_text().splitlines()] if profile.exists() else []
        trusted = [x for x in lines if x["side"] == "trusted"]
        for i, record in enumerate(records):
            go = trusted[i]["go"] if i < len(trusted) else {}
            steps = {side: {ph: per_call_ms(go[side], ph) for ph in ("timing", "baseline")}
                     for side in go}
            row = {"variant": variant, "task_id": record.task_id, "status": record.status,
                   "speedup": record.speedup, "speedup_low": record.speedup_low,
                   "speedup_high": record.speedup_high, "runtime_ms": record.runtime_ms,
                   "ref_runtime_ms": record.ref_runtime_ms,
                   "ref_alone_runtime_ms": record.ref_alone_runtime_ms, "basis": record.basis,
                   "new_alone_runtime_ms": record.new_alone_runtime_ms,
                   "calls_per_batch": record.calls_per_batch, "steps_ms_per_call": steps}
            rows.append(row)
            show = "  ".join(f"{side[:3]} " + "/".join(f"{v:.2f}" for v in s.get("timing", {}).values())
                             for side, s in steps.items())
            speed = (f"{record.speedup:.3f} [{record.speedup_low:.3f}, {record.speedup_high:.3f}]"
                     if record.status == "ok" else f"{record.status} {record.error or ''}"[:120])
            print(f"{variant:10s} {record.task_id}: {speed}  ms/call answer/freeze/read back: {show}",
                  flush=True)
        print(f"{variant:10s} wall {wall_s:.0f} s", flush=True)
    ok = [r for r in rows if r["status"] == "ok"]
    for variant in args.variants:
        mine = [r["speedup"] for r in ok if r["variant"] == variant]
        if mine:
            print(f"{variant:10s} median copy speedup {statistics.median(mine):.3f} over {len(mine)}")
    (args.out / "screen.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
