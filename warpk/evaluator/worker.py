"""The child process that evaluates one candidate against its task's reference.

Run as `python -m warpk.evaluator.worker REQUEST.json RESULT.json` by warpk.evaluator.sandbox,
in a fresh process: a candidate that crashes, hangs or calls os._exit takes only this process
down, and the parent records why. The result file is written only at the end, so a missing
result always means the worker died.

Steps and the status each can yield:
  1. parse the candidate and find `ModelNew`        -> compile_error / static_reject
  2. execute the candidate module (imports, builds)  -> compile_error
  3. build Model and ModelNew from the same seed     -> runtime_error
  4. correctness: fresh seeded inputs per trial, outputs compared with per-dtype tolerances;
     shape or dtype mismatch, NaN or non-tensor output -> incorrect; an exception -> runtime_error
  5. timing: warmup, then trials alternating reference and candidate in a seeded random order;
     each trial times enough back-to-back calls to last `min_trial_ms`; median and IQR per call.

Non-goals: hack resistance (static checks, poisoned outputs, L2 flushes, CUDA events) lands with
the evaluator issue (#3); this worker times with a device synchronize around perf_counter.
"""

from __future__ import annotations

import ast
import json
import math
import random
import statistics
import sys
import time
import traceback
import types
from pathlib import Path


class Verdict(Exception):
    """Stops the evaluation with a non-ok status and a one-line reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _one_line(err: BaseException) -> str:
    """`Type: message` of an exception plus the candidate line it came from, on one line."""
    where = ""
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if frame.filename.startswith("<candidate"):
            where = f" (candidate line {frame.lineno})"
            break
    text = f"{type(err).__name__}: {err}".replace("\n", " ").strip()
    return (text[:400] + where) if len(text) > 400 else text + where


def _load_module(source: str, filename: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module  # some code (dataclasses, pickling) looks modules up by name
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _flatten(out) -> list:
    return list(out) if isinstance(out, list | tuple) else [out]


def _compare(torch, ref_out, new_out, protocol: dict) -> tuple[float, float]:
    """Max abs and normalised errors; raises Verdict('incorrect') on any mismatch."""
    refs, news = _flatten(ref_out), _flatten(new_out)
    if len(refs) != len(news):
        raise Verdict("incorrect", f"returned {len(news)} outputs, reference returns {len(refs)}")
    worst_abs = worst_rel = 0.0
    for i, (r, n) in enumerate(zip(refs, news, strict=True)):
        if not isinstance(n, torch.Tensor):
            raise Verdict("incorrect", f"output {i} is {type(n).__name__}, not a tensor")
        if n.shape != r.shape:
            raise Verdict("incorrect", f"output {i} shape {tuple(n.shape)} != reference {tuple(r.shape)}")
        if n.dtype != r.dtype:
            raise Verdict("incorrect", f"output {i} dtype {n.dtype} != reference {r.dtype}")
        low = r.dtype in (torch.float16, torch.bfloat16)
        tol = protocol["tolerance_low_precision"] if low else protocol["tolerance_fp32"]
        r64, n64 = r.detach().double().cpu(), n.detach().double().cpu()
        if torch.isnan(n64).any():
            raise Verdict("incorrect", f"output {i} contains NaN")
        if not torch.equal(torch.isinf(n64), torch.isinf(r64)):
            raise Verdict("incorrect", f"output {i} has inf where the reference does not")
        diff = (n64 - r64).abs()
        abs_err = float(diff.max()) if diff.numel() else 0.0
        rel_err = abs_err / max(float(r64.abs().max()) if r64.numel() else 0.0, 1e-12)
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        if not torch.allclose(n64, r64, atol=tol, rtol=tol):
            raise Verdict(
                "incorrect", f"output {i} differs: max abs err {abs_err:.3g} > tolerance {tol:g}"
            )
    return worst_abs, worst_rel


def _timed(torch, fn, inputs, calls: int, sync) -> float:
    """Milliseconds per call over `calls` back-to-back calls."""
    sync()
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn(*inputs)
    sync()
    return (time.perf_counter_ns() - start) / 1e6 / calls


def _median_iqr(values: list[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q3 - q1


def evaluate(request: dict) -> dict:
    """Evaluate one candidate; returns the result dict (see module docstring)."""
    result: dict = {"status": "ok", "error": None}
    protocol = request["protocol"]
    phase_start = time.perf_counter()

    try:
        tree = ast.parse(request["candidate_source"], filename="<candidate>")
    except SyntaxError as err:
        raise Verdict("compile_error", f"SyntaxError: {err.msg} (candidate line {err.lineno})") from err
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        raise Verdict("static_reject", "no top-level class ModelNew")

    import torch

    torch.set_num_threads(protocol["num_threads"])
    device = torch.device(request["device"])
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise Verdict("runtime_error", "device=cuda requested but torch sees no CUDA device")
        result["device"] = torch.cuda.get_device_name(device)

        def sync():
            torch.cuda.synchronize(device)
    else:
        result["device"] = "cpu"

        def sync():
            return None

    try:
        candidate = _load_module(request["candidate_source"], "<candidate>", "warpk_candidate")
    except BaseException as err:  # noqa: BLE001 - any failure to load is the candidate's
        raise Verdict("compile_error", _one_line(err)) from err
    if not isinstance(getattr(candidate, "ModelNew", None), type):
        raise Verdict("static_reject", "ModelNew is not a class after loading the module")
    task = _load_module(request["task_source"], request["task_path"], "warpk_task")
    for key, value in request["shape_overrides"].items():
        setattr(task, key, value)
    result["compile_s"] = time.perf_counter() - phase_start

    phase_start = time.perf_counter()
    seed = request["seed"]
    init_inputs = task.get_init_inputs()
    torch.manual_seed(seed)
    reference = task.Model(*init_inputs).to(device).eval()
    try:
        torch.manual_seed(seed)
        model_new = candidate.ModelNew(*init_inputs).to(device).eval()
    except Exception as err:  # noqa: BLE001
        raise Verdict("runtime_error", f"ModelNew(...) raised {_one_line(err)}") from err

    worst_abs = worst_rel = 0.0
    with torch.no_grad():
        for trial in range(protocol["correctness_trials"]):
            torch.manual_seed(seed * 1000 + trial + 1)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
            ref_out = reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            try:
                new_out = model_new(*inputs)
            except Exception as err:  # noqa: BLE001
                raise Verdict("runtime_error", f"forward raised {_one_line(err)}") from err
            sync()
            abs_err, rel_err = _compare(torch, ref_out, new_out, protocol)
            worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
    result["max_abs_err"], result["max_rel_err"] = worst_abs, worst_rel
    result["correctness_s"] = time.perf_counter() - phase_start

    phase_start = time.perf_counter()
    with torch.no_grad():
        for _ in range(protocol["warmup_calls"]):
            reference(*inputs)
            model_new(*inputs)
        probe = {"ref": _timed(torch, reference, inputs, 1, sync),
                 "new": _timed(torch, model_new, inputs, 1, sync)}
        calls = {k: max(1, math.ceil(protocol["min_trial_ms"] / max(v, 1e-6))) for k, v in probe.items()}
        order = random.Random(seed)
        times: dict[str, list[float]] = {"ref": [], "new": []}
        for _ in range(protocol["timing_trials"]):
            pair = [("ref", reference), ("new", model_new)]
            order.shuffle(pair)
            for name, fn in pair:
                times[name].append(_timed(torch, fn, inputs, calls[name], sync))
    result["runtime_ms"], result["runtime_iqr_ms"] = _median_iqr(times["new"])
    result["ref_runtime_ms"], result["ref_runtime_iqr_ms"] = _median_iqr(times["ref"])
    result["calls_per_trial"] = calls["new"]
    result["timing_s"] = time.perf_counter() - phase_start
    return result


def main(argv: list[str]) -> int:
    request_path, result_path = Path(argv[1]), Path(argv[2])
    request = json.loads(request_path.read_text())
    try:
        result = evaluate(request)
    except Verdict as verdict:
        result = {"status": verdict.status, "error": verdict.reason}
    except Exception as err:  # noqa: BLE001 - the task itself failed: say so, don't blame the candidate
        result = {"status": "runtime_error", "error": f"evaluation failed: {_one_line(err)}"}
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
