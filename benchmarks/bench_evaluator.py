"""Evaluator throughput on a GRPO-like batch: WARP-K's pipeline versus KernelBench-style serial.

The batch: `--per-task` candidates for each of `--tasks` bundled tasks, half CUDA (load_inline)
and half Triton, each a distinct variant of the task's bundled solution (a comment inside the
kernel source and a unique extension name, so every one is a separate build, as distinct GRPO
samples are). Three measurements, side by side in one process, same protocol:

  serial    one after another in this process with no pool, no sandbox, no second process
            and no cache, as KernelBench's harness does (5 allclose trials, 100 timed calls
            each: `kernelbench_style`, written here for the comparison);
  cold      Evaluator.evaluate_many with empty build and result caches: CUDA builds in the
            compile pool overlap measurement on the GPU lanes;
  warm      the same batch again through the same Evaluator: result-cache hits.

The pipeline runs first, so the serial run gets any benefit of a warm OS file cache.

    python benchmarks/bench_evaluator.py --hardware h200 --out results/ [--tasks 4 --per-task 8]

Writes bench_evaluator.json (per-item verdicts and times) and bench_evaluator.md to --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.config import EvaluateConfig, HardwareConfig  # noqa: E402
from warpk.evaluator import EvalItem, Evaluator  # noqa: E402
from warpk.tasks import BUNDLED_ROOT, load_task_file  # noqa: E402

CONF = Path(__file__).resolve().parents[1] / "conf"
DEFAULT_TASKS = ("01_softmax", "02_layer_norm", "03_gelu_tanh", "06_residual_add_layer_norm")


def hardware_profile(name: str) -> HardwareConfig:
    raw = yaml.safe_load((CONF / "hardware" / f"{name}.yaml").read_text())
    raw.pop("clock_profiles", None)
    return HardwareConfig(**raw)


def cuda_variant(source: str, k: int) -> str:
    """A distinct build: a comment in the CUDA source and a unique extension name."""
    source = source.replace("__global__", f"/* variant {k} */ __global__", 1)
    return re.sub(r'name\s*=\s*"([^"]+)"', lambda m: f'name="{m.group(1)}_v{k}"', source, count=1)


def triton_variant(source: str, k: int) -> str:
    """A distinct compile: a comment inside the first @triton.jit function's body."""
    lines = source.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("@triton.jit"))
    end = next(i for i in range(at + 1, len(lines)) if lines[i].rstrip().endswith(":"))
    lines.insert(end + 1, f"    # variant {k}")
    return "\n".join(lines) + "\n"


def make_batch(task_names: list[str], per_task: int) -> list[EvalItem]:
    items = []
    for name in task_names:
        task = load_task_file(BUNDLED_ROOT / "problems" / f"{name}.py", "bundled")
        cuda = (BUNDLED_ROOT / "solutions" / name / "cuda.py").read_text()
        triton = (BUNDLED_ROOT / "solutions" / name / "triton.py").read_text()
        for k in range(per_task):
            if k % 2 == 0:
                items.append(EvalItem(task, cuda_variant(cuda, k), f"cuda_v{k}.py"))
            else:
                items.append(EvalItem(task, triton_variant(triton, k), f"triton_v{k}.py"))
    assert len({i.candidate_source for i in items}) == len(items), "variants must be distinct"
    return items


def _import_file(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def kernelbench_style(item: EvalItem, job: Path, trials: int = 5, perf_trials: int = 100) -> dict:
    """One candidate the way KernelBench's harness evaluates it: imported into this process,
    `trials` correctness checks (allclose 1e-2), then `perf_trials` CUDA-event-timed calls of
    each model. No isolation of any kind: the baseline the trust boundary costs time against."""
    import torch

    task = _import_file(item.task.path, f"bench_task_{job.name}")
    path = job / "candidate.py"
    path.write_text(item.candidate_source)
    try:
        candidate = _import_file(path, f"bench_candidate_{job.name}")
    except Exception as err:  # noqa: BLE001 - report, keep going
        return {"status": "compile_error", "error": f"{type(err).__name__}: {err}"[:300]}
    init = task.get_init_inputs()
    torch.manual_seed(0)
    ref = task.Model(*init).cuda().eval()
    torch.manual_seed(0)
    new = candidate.ModelNew(*init).cuda().eval()
    with torch.no_grad():
        for trial in range(trials):
            torch.manual_seed(trial)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
            if not torch.allclose(ref(*inputs), new(*inputs), atol=1e-2, rtol=1e-2):
                return {"status": "incorrect", "error": f"trial {trial}"}
        times = {}
        for label, model in (("ref", ref), ("new", new)):
            model(*inputs)
            torch.cuda.synchronize()
            ms = []
            for _ in range(perf_trials):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                end.synchronize()
                ms.append(start.elapsed_time(end))
            times[label] = sorted(ms)[len(ms) // 2]
    return {"status": "ok", "speedup": times["ref"] / times["new"]}


def serial(items: list[EvalItem], evaluator: Evaluator, root: Path) -> tuple[float, list[dict]]:
    """KernelBench-style: each item evaluated in this process, one after another, cold."""
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    os.environ["TORCH_CUDA_ARCH_LIST"] = evaluator.hardware.cuda_arch or ""
    results, start = [], time.perf_counter()
    for i, item in enumerate(items):
        job = root / f"job{i}"
        job.mkdir(parents=True)
        os.environ["TORCH_EXTENSIONS_DIR"] = str(root / "ext" / str(i))
        t0 = time.perf_counter()
        result = kernelbench_style(item, job)
        result["wall_s"] = time.perf_counter() - t0
        results.append({"candidate": item.candidate, "task": item.task.name, **result})
        print(
            f"serial {i + 1}/{len(items)} {item.task.name} {item.candidate}: {result['status']} "
            f"({result['wall_s']:.1f} s)",
            flush=True,
        )
    return time.perf_counter() - start, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hardware", default="h200")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--per-task", type=int, default=8)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip-serial", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    hardware = hardware_profile(args.hardware)
    items = make_batch(list(DEFAULT_TASKS[: args.tasks]), args.per_task)
    root = Path(tempfile.mkdtemp(prefix="bench-evaluator-"))
    protocol = EvaluateConfig(cache_dir=str(root / "pipeline-cache"))
    evaluator = Evaluator(protocol, hardware, "auto", seed=0)
    print(
        f"{len(items)} candidates, lanes {evaluator.lanes}, {evaluator.compile_workers} compile workers",
        flush=True,
    )

    start = time.perf_counter()
    cold = evaluator.evaluate_many(items)
    cold_s = time.perf_counter() - start
    print(f"cold pipeline: {cold_s:.1f} s", flush=True)
    start = time.perf_counter()
    warm = evaluator.evaluate_many(items)
    warm_s = time.perf_counter() - start
    print(f"warm pipeline: {warm_s:.2f} s", flush=True)
    serial_s, serial_results = (None, []) if args.skip_serial else serial(items, evaluator, root / "serial")
    if serial_s is not None:
        print(f"serial: {serial_s:.1f} s", flush=True)

    n = len(items)
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "hardware": args.hardware,
        "candidates": n,
        "lanes": evaluator.lanes,
        "compile_workers": evaluator.compile_workers,
        "protocol": dataclasses.asdict(protocol),
        "cold_s": cold_s,
        "warm_s": warm_s,
        "serial_s": serial_s,
        "cold_per_min": n / cold_s * 60,
        "warm_per_min": n / warm_s * 60,
        "serial_per_min": n / serial_s * 60 if serial_s else None,
        "cold_speedup_vs_serial": serial_s / cold_s if serial_s else None,
        "warm_speedup_vs_serial": serial_s / warm_s if serial_s else None,
        "cold": [json.loads(r.to_json()) for r in cold],
        "warm_cached": [r.cached for r in warm],
        "serial": serial_results,
        "verdicts_agree": [r.status for r in cold] == [r["status"] for r in serial_results]
        if serial_s
        else None,
    }
    (args.out / "bench_evaluator.json").write_text(json.dumps(report, indent=1, default=str))
    lines = [
        f"# Evaluator benchmark ({report['date']}, {args.hardware}, {n} candidates)",
        "",
        "| mode | wall s | candidates/min | vs serial |",
        "|---|---|---|---|",
    ]
    for mode in ("serial", "cold", "warm"):
        wall = report[f"{mode}_s"]
        if wall is None:
            continue
        ratio = report.get(f"{mode}_speedup_vs_serial") if mode != "serial" else 1.0
        lines.append(
            f"| {mode} | {wall:.2f} | {n / wall * 60:.1f} | {'-' if ratio is None else f'{ratio:.1f}x'} |"
        )
    statuses = {}
    for r in cold:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    lines += ["", f"cold verdicts: {statuses}; serial verdicts agree: {report['verdicts_agree']}"]
    (args.out / "bench_evaluator.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
