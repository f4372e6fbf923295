"""The child process that evaluates one candidate against its task's reference.

Run as `python -m warpk.evaluator.worker` by warpk.evaluator.sandbox (see its threat model): it
reads request paths from stdin, one per line, and evaluates each in the request's folder, so
torch is imported and the CUDA context made once per worker, not once per candidate. The result
file is written only at the end, so a missing result always means the worker died. The worker
writes its current phase ("compile", "run") to ./phase so the parent can apply separate compile
and run time limits.

Modes: "compile" only loads the candidate (builds its CUDA extension into the shared build
cache, with the GPU hidden); "measure" does everything:
  1. load the candidate under the build lock                     -> compile_error
  2. build Model and ModelNew from the same seed                 -> runtime_error
  3. correctness (warpk.evaluator.checks): fresh seeded inputs per trial, reference and
     candidate order alternating, inputs cloned and checked unmodified, outputs poisoned
     and checked written, exact tensor type/device/shape/dtype, per-dtype tolerances, NaN
     never passes, a determinism re-run, other declared shapes on GPU -> incorrect
  4. FLOPs (torch's flop counter on the reference) and minimum bytes moved, for the parent's
     roofline plausibility check
  5. timing: rotating fresh input copies, L2 flushed before every timed call on GPU, CUDA
     events around a device-wide synchronize (perf_counter on CPU), reference and candidate
     interleaved in a seeded random order, every timed candidate output verified.
  6. energy (evaluate.energy=nvml, CUDA only): reference and candidate on the GPU's NVML
     energy counter, back to back, alternating (warpk.evaluator.energy); a meter failure is
     reported as energy_error, never replaced by a modelled value.
A CUDA fault (illegal address, device-side assert) is reported as `crashed`.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import random
import statistics
import sys
import time
import traceback
import types
from pathlib import Path

from warpk.evaluator.checks import (
    Verdict,
    check_correct,
    clone_inputs,
    poison_like,
    same_inputs,
    shares_storage,
)

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current L2 (H100 50 MB, H200 60 MB)
CANDIDATE_FILE = "candidate.py"  # written into the worker's temp working dir
TASK_FILE = "task.py"


def one_line(err: BaseException) -> str:
    """`Type: message` of an exception plus the candidate line it came from, on one line."""
    where = ""
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if frame.filename.endswith(CANDIDATE_FILE):
            where = f" (candidate line {frame.lineno})"
            break
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return (text[:400] if len(text) > 400 else text) + where


def _is_cuda_fault(err: BaseException) -> bool:
    text = str(err)
    return (
        type(err).__name__ == "AcceleratorError"
        or "CUDA error" in text
        or "illegal memory access" in text
        or "device-side assert" in text
    )


def _fail(err: BaseException, what: str) -> Verdict:
    if _is_cuda_fault(err):
        return Verdict("crashed", f"CUDA fault {what}: {one_line(err)}")
    return Verdict("runtime_error", f"{what} raised {one_line(err)}")


def _phase(name: str) -> None:
    Path("phase").write_text(f"{name} {time.time()}")


def _load_module(source: str, filename: str, name: str) -> types.ModuleType:
    """Import `source` as module `name` from a real file in the working dir: triton.jit reads
    its kernels' source with inspect, which needs a file."""
    path = Path(filename).resolve()
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and triton look modules up by name
    spec.loader.exec_module(module)
    return module


def load_candidate(request: dict) -> types.ModuleType:
    """Execute the candidate module, holding the per-source build lock (load_inline builds)."""
    build_dir = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not build_dir:
        try:
            return _load_module(request["candidate_source"], CANDIDATE_FILE, "warpk_candidate")
        except BaseException as err:  # noqa: BLE001 - any failure to load is the candidate's
            raise Verdict("compile_error", one_line(err)) from err
    Path(build_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(build_dir) / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this process dies
        try:
            return _load_module(request["candidate_source"], CANDIDATE_FILE, "warpk_candidate")
        except BaseException as err:  # noqa: BLE001 - any failure to load is the candidate's
            raise Verdict("compile_error", one_line(err)) from err


_DEVICES: dict[str, Device] = {}  # one per kind for the life of a worker (flush buffer, name)


def device_for(torch, kind: str) -> Device:
    if kind not in _DEVICES:
        _DEVICES[kind] = Device(torch, kind)
    return _DEVICES[kind]


class Device:
    """CPU or CUDA: synchronisation, timers and the L2 flush."""

    def __init__(self, torch, kind: str):
        self.torch = torch
        self.device = torch.device("cuda:0" if kind == "cuda" else "cpu")
        self.cuda = kind == "cuda"
        if self.cuda and not torch.cuda.is_available():
            raise Verdict("runtime_error", "device=cuda requested but torch sees no CUDA device")
        self.name = torch.cuda.get_device_name(self.device) if self.cuda else "cpu"
        self.flush_buffer = (
            torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=self.device) if self.cuda else None
        )

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def timed_call(self, fn, inputs) -> tuple[float, object]:
        """(milliseconds, output) of one call; on GPU the L2 is flushed first."""
        if not self.cuda:
            start = time.perf_counter_ns()
            out = fn(*inputs)
            return (time.perf_counter_ns() - start) / 1e6, out
        self.flush_buffer.zero_()
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        self.torch.cuda.synchronize()
        start.record()
        out = fn(*inputs)
        self.torch.cuda.synchronize()  # device-wide: work on any stream is inside the window
        end.record()
        end.synchronize()
        return start.elapsed_time(end), out


def _median_iqr(values: list[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q3 - q1


def _build(torch, task, candidate, seed: int, device) -> tuple[object, object]:
    """Model and ModelNew from the same seed, built directly on the device (GPU-sized weights
    take seconds to initialise on the CPU)."""
    init_inputs = task.get_init_inputs()
    with torch.device(device):
        torch.manual_seed(seed)
        reference = task.Model(*init_inputs).to(device).eval()
        try:
            torch.manual_seed(seed)
            model_new = candidate.ModelNew(*init_inputs).to(device).eval()
        except Exception as err:  # noqa: BLE001
            raise _fail(err, "ModelNew(...)") from err
    return reference, model_new


def _inputs(torch, task, seed: int, device) -> list:
    """The task's inputs for `seed`, drawn directly on the device."""
    torch.manual_seed(seed)
    with torch.device(device):
        inputs = task.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def _call(fn, inputs, what: str):
    try:
        return fn(*inputs)
    except Exception as err:  # noqa: BLE001
        raise _fail(err, what) from err


def correctness(torch, dev: Device, task, reference, model_new, protocol: dict, seed: int) -> tuple:
    """Runs the correctness trials; returns (max_abs_err, max_rel_err, last inputs)."""
    worst_abs = worst_rel = 0.0
    inputs, template = [], None
    for trial in range(protocol["correctness_trials"]):
        inputs = _inputs(torch, task, seed * 1000 + trial + 1, dev.device)
        ref_in, new_in = clone_inputs(torch, inputs), clone_inputs(torch, inputs)
        pristine = clone_inputs(torch, inputs)
        candidate_first = trial % 2 == 1  # alternate, so reuse of the reference's freed memory cannot pass
        if not candidate_first:
            ref_out = template = reference(*ref_in)
            dev.sync()
        poison_like(torch, template)  # an output the candidate never writes reads as NaN
        new_out = _call(model_new, new_in, "forward")
        dev.sync()
        if candidate_first:
            ref_out = reference(*ref_in)
            dev.sync()
        if not same_inputs(torch, new_in, pristine):
            raise Verdict("incorrect", "the candidate modified its inputs in place")
        abs_err, rel_err = check_correct(torch, ref_out, new_out, protocol, f"trial {trial}")
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        if trial == 0:  # determinism: the same inputs again, over poisoned memory
            poison_like(torch, template)
            again = _call(model_new, clone_inputs(torch, pristine), "forward")
            dev.sync()
            check_correct(torch, new_out, again, protocol, "a repeated call (non-deterministic output)")
            if shares_storage(torch, new_out, again):
                raise Verdict(
                    "incorrect",
                    "two calls returned the same output storage (a stored or "
                    "cached result, not a new computation)",
                )
    return worst_abs, worst_rel, inputs


def apply_shape(task, request: dict, shape: str) -> None:
    """Set the task's module constants to `shape`: the file's own values, then its overrides."""
    for key, value in request["file_constants"].items():
        setattr(task, key, value)
    for key, value in request["shapes"].get(shape, {}).items():
        setattr(task, key, value)


def other_shapes(torch, dev: Device, task, candidate, request: dict) -> None:
    """On GPU, one correctness trial at every other declared shape: catches shape-specialised code."""
    if not dev.cuda:
        return
    for name in request["shapes"]:
        if name == request["shape"]:
            continue
        apply_shape(task, request, name)
        reference, model_new = _build(torch, task, candidate, request["seed"], dev.device)
        inputs = _inputs(torch, task, request["seed"] + 7, dev.device)
        ref_out = reference(*clone_inputs(torch, inputs))
        new_out = _call(model_new, inputs, f"forward at the {name} shape")
        dev.sync()
        check_correct(torch, ref_out, new_out, request["protocol"], f"the {name} shape")
        del reference, model_new, inputs, ref_out, new_out
    apply_shape(task, request, request["shape"])


def work_estimate(torch, reference, inputs) -> tuple[float, float]:
    """(FLOPs, minimum bytes moved) of one reference call: torch's flop counter; inputs,
    outputs and parameters each read or written once."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = reference(*clone_inputs(torch, inputs))
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    tensors += [o for o in (out if isinstance(out, list | tuple) else [out]) if isinstance(o, torch.Tensor)]
    tensors += list(reference.parameters()) + list(reference.buffers())
    return float(counter.get_total_flops()), float(sum(t.numel() * t.element_size() for t in tensors))


def timing(torch, dev: Device, task, reference, model_new, protocol: dict, seed: int) -> dict:
    """Interleaved timing; every trial draws new inputs (new contents, not only new buffers), so
    no cache keyed on pointers, shapes or values can hit, and the candidate's timed output is
    verified against the reference's timed output on the same inputs."""
    warm = _inputs(torch, task, seed * 1000 + 500, dev.device)
    for _ in range(protocol["warmup_calls"]):
        reference(*clone_inputs(torch, warm))
        model_new(*clone_inputs(torch, warm))
    dev.sync()
    order = random.Random(seed)
    times: dict[str, list[float]] = {"ref": [], "new": []}
    for trial in range(protocol["timing_trials"]):
        inputs = _inputs(torch, task, seed * 1000 + 501 + trial, dev.device)
        pair = [("ref", reference), ("new", model_new)]
        order.shuffle(pair)
        outs = {}
        for name, fn in pair:
            ms, outs[name] = dev.timed_call(fn, clone_inputs(torch, inputs))
            times[name].append(ms)
        check_correct(torch, outs["ref"], outs["new"], protocol, f"timed call {trial} (cached result?)")
    new_ms, new_iqr = _median_iqr(times["new"])
    ref_ms, ref_iqr = _median_iqr(times["ref"])
    return {
        "runtime_ms": new_ms,
        "runtime_iqr_ms": new_iqr,
        "ref_runtime_ms": ref_ms,
        "ref_runtime_iqr_ms": ref_iqr,
    }


ENERGY_INPUT_SETS = 3  # fresh input sets the energy loop rotates through


def energy(torch, dev: Device, task, reference, model_new, protocol: dict, seed: int, spec: dict) -> dict:
    """Measured energy per call of both (warpk.evaluator.energy) on fresh inputs, after timing.

    The calls run back to back over a few fresh input sets, the same way for both; the
    candidate's last output is checked against the reference. A meter or NVML failure returns
    `energy_error` (the record says why); a candidate failure is the candidate's verdict.
    """
    from warpk.evaluator.energy import measure_pair, open_cuda_meter

    sets = [_inputs(torch, task, seed * 1000 + 900 + k, dev.device) for k in range(ENERGY_INPUT_SETS)]
    last: dict[str, tuple] = {}

    def looped(name: str, fn):
        calls = iter(range(1 << 62))

        def call() -> None:
            k = next(calls) % len(sets)
            last[name] = (k, _call(fn, sets[k], f"{name} in the energy loop"))

        return call

    try:
        props = torch.cuda.get_device_properties(dev.device)
        with open_cuda_meter(props, spec["min_window_s"]) as meter:
            fields = measure_pair(meter, looped("reference", reference), looped("candidate", model_new),
                                  dev.sync, spec["repeats"], spec["idle_window_s"])
    except Verdict:
        raise
    except Exception as err:  # noqa: BLE001 - NVML or the meter: the record says why, no energy
        if _is_cuda_fault(err):
            raise _fail(err, "in the energy loop") from err
        return {"energy_error": f"nvml energy measurement failed: {one_line(err)}"}
    k, out = last["candidate"]
    check_correct(torch, reference(*clone_inputs(torch, sets[k])), out, protocol, "an energy-loop call")
    return fields


def evaluate(request: dict) -> dict:
    """Evaluate one candidate; returns the result dict (see module docstring)."""
    protocol = request["protocol"]
    result: dict = {"status": "ok", "error": None}
    start = time.perf_counter()
    _phase("compile")
    import torch

    torch.set_num_threads(protocol["num_threads"])
    candidate = load_candidate(request)
    if not isinstance(getattr(candidate, "ModelNew", None), type):
        raise Verdict("static_reject", "ModelNew is not a class after loading the module")
    result["compile_s"] = time.perf_counter() - start
    if request["mode"] == "compile":
        return result

    _phase("run")
    dev = device_for(torch, request["device"])
    result["device"] = dev.name
    task = _load_module(request["task_source"], TASK_FILE, "warpk_task")
    keys = {k for overrides in request["shapes"].values() for k in overrides}
    request["file_constants"] = {k: getattr(task, k) for k in keys if hasattr(task, k)}
    apply_shape(task, request, request["shape"])
    start = time.perf_counter()
    with torch.no_grad():
        reference, model_new = _build(torch, task, candidate, request["seed"], dev.device)
        abs_err, rel_err, inputs = correctness(
            torch, dev, task, reference, model_new, protocol, request["seed"]
        )
        result["max_abs_err"], result["max_rel_err"] = abs_err, rel_err
        result["flops"], result["min_bytes"] = work_estimate(torch, reference, inputs)
        other_shapes(torch, dev, task, candidate, request)
        result["correctness_s"] = time.perf_counter() - start
        start = time.perf_counter()
        result.update(timing(torch, dev, task, reference, model_new, protocol, request["seed"]))
        result["timing_s"] = time.perf_counter() - start
        spec = request.get("energy") or {}
        if spec.get("mode") == "nvml" and dev.cuda:
            start = time.perf_counter()
            result.update(energy(torch, dev, task, reference, model_new, protocol, request["seed"], spec))
            result["energy_s"] = time.perf_counter() - start
    return result


def run_one(request_path: Path) -> dict:
    """Evaluate the request in `request_path`'s folder (also the working dir)."""
    os.chdir(request_path.parent)
    request = json.loads(request_path.read_text())
    request_path.unlink()  # nothing of the harness stays readable in the candidate's folder
    nonce = request.pop("nonce", None)
    return {**_run_request(request), "nonce": nonce}


def _run_request(request: dict) -> dict:
    if request.get("build_dir"):
        os.environ["TORCH_EXTENSIONS_DIR"] = request["build_dir"]  # torch reads it at build time
    else:
        os.environ.pop("TORCH_EXTENSIONS_DIR", None)
    try:
        return evaluate(request)
    except Verdict as verdict:
        return {"status": verdict.status, "error": verdict.reason}
    except Exception as err:  # noqa: BLE001 - the harness or the task failed: say so
        status = "crashed" if _is_cuda_fault(err) else "runtime_error"
        return {"status": status, "error": f"evaluation failed: {one_line(err)}"}


def _forget_candidate() -> None:
    """Between requests: drop the candidate's and task's modules, global nn.Module hooks, and
    cached GPU memory, so nothing of one candidate reaches the next."""
    for name in ("warpk_candidate", "warpk_task"):
        sys.modules.pop(name, None)
    import gc

    torch = sys.modules.get("torch")
    if torch is not None:
        module = torch.nn.modules.module
        for name in dir(module):
            if name.startswith("_global_") and isinstance(getattr(module, name), dict):
                getattr(module, name).clear()
    gc.collect()
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def serve() -> int:
    """Evaluate requests whose paths arrive one per line on stdin; answer each with one JSON line
    on the original stdout, a pipe only the parent reads. The candidate's own prints go to
    stderr, and no result file exists for it to forge."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        result = run_one(Path(line.strip()))
        _forget_candidate()
        answers.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve())
