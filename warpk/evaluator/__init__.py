"""The kernel evaluator: candidate source in, `EvalRecord` out. The reward source of WARP-K.

`Evaluator.evaluate_many(items)` for a batch of (task, candidate) items:
  1. static checks in this process (warpk.evaluator.static): a rejected candidate never runs;
  2. the result cache: an identical (task, shape, candidate, hardware, protocol, software)
     was measured before -> its record, marked `cached`; duplicates inside the batch (common in
     a GRPO group) are measured once;
  3. CUDA candidates are built by a pool of compile workers on the CPU (GPU hidden), into a
     build cache keyed by source hash, while
  4. one measuring lane per GPU runs one sandboxed worker at a time (warpk.evaluator.worker),
     taking items in order as their builds finish;
  5. a measured runtime below the task's roofline floor becomes `implausible`.
Energy (`evaluate.energy`, resolved once at construction): `nvml` -> the worker measures both
reference and candidate on the GPU's NVML counter (warpk.evaluator.energy), `energy_source="nvml"`;
a failed measurement leaves energy None with `energy_source="none"` and `energy_error` saying why,
never a modelled stand-in. `model` -> power model x measured runtime, `energy_source="model"`.
`none` -> no energy figures.

Non-goals here: trl, peft, wandb or hydra (workers re-import this package in fresh processes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator.energy import IDLE_WINDOW_S
from warpk.evaluator.roofline import implausible_reason, roofline_floor_ms
from warpk.evaluator.sandbox import Limits, WorkerProcess, run_worker
from warpk.evaluator.static import candidate_backend, check_source
from warpk.hardware import resolve_energy
from warpk.records import EvalRecord
from warpk.tasks import Task
from warpk.telemetry.model import modelled_energy

PROTOCOL_VERSION = 3  # bump whenever a change in the protocol changes what a record means
CACHEABLE = ("ok", "static_reject", "compile_error", "runtime_error", "incorrect", "implausible")
RESULT_FIELDS = (
    "status",
    "error",
    "device",
    "max_abs_err",
    "max_rel_err",
    "runtime_ms",
    "runtime_iqr_ms",
    "ref_runtime_ms",
    "ref_runtime_iqr_ms",
    "flops",
    "min_bytes",
    "compile_s",
    "correctness_s",
    "timing_s",
    "energy_s",
)
MEASURED_ENERGY_FIELDS = (
    "energy_j",
    "energy_uncertainty_j",
    "avg_power_w",
    "window_s",
    "ref_energy_j",
    "ref_energy_uncertainty_j",
    "ref_avg_power_w",
    "ref_window_s",
    "idle_power_w",
)


@dataclass(frozen=True)
class EvalItem:
    """One candidate for one task."""

    task: Task
    candidate_source: str
    candidate: str  # label shown in tables, e.g. the file name


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def resolve_shape(requested: str, hardware: HardwareConfig) -> str:
    """'auto' means CPU-sized shapes on a CPU and GPU-sized shapes on a GPU."""
    if requested != "auto":
        return requested
    return "cpu" if hardware.device == "cpu" else "gpu"


def default_cache_dir() -> Path:
    return Path(os.environ.get("WARPK_CACHE_DIR") or Path.home() / ".cache" / "warpk")


def _software() -> str:
    try:
        return f"torch {version('torch')}"
    except PackageNotFoundError:
        return "torch unknown"


class Evaluator:
    """Evaluates candidates with one protocol on one hardware profile."""

    def __init__(
        self,
        protocol: EvaluateConfig,
        hardware: HardwareConfig,
        shape: str = "auto",
        seed: int = 0,
        lanes: list[str] | None = None,
    ):
        self.protocol = protocol
        self.hardware = hardware
        self.shape = resolve_shape(shape, hardware)
        self.energy = resolve_energy(protocol.energy, hardware.device, hardware.name)
        self.seed = seed
        self.cache_dir = Path(protocol.cache_dir) if protocol.cache_dir else default_cache_dir()
        self.lanes = lanes if lanes is not None else self._default_lanes()
        cores = os.cpu_count() or 1
        auto_workers = max(1, min(cores - len(self.lanes), _ram_gb() // 8))
        self.compile_workers = protocol.compile_workers or auto_workers

    def _default_lanes(self) -> list[str]:
        """GPU indices to measure on (as CUDA_VISIBLE_DEVICES values); [''] for the CPU."""
        if self.hardware.device == "cpu":
            return [""]
        if self.protocol.gpus:
            return [str(i) for i in self.protocol.gpus]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible:
            return [v.strip() for v in visible.split(",") if v.strip()]
        from warpk.hardware import detect_gpu_names

        return [str(i) for i in range(len(detect_gpu_names()))] or ["0"]

    # --- one item -----------------------------------------------------------------------
    def _request(self, item: EvalItem, mode: str) -> dict:
        shapes = {"gpu": {}, **{k: v for k, v in item.task.shapes.items()}}
        return {
            "mode": mode,
            "task_source": item.task.path.read_text(),
            "task_path": str(item.task.path),
            "candidate_source": item.candidate_source,
            "shape": self.shape,
            "shapes": shapes if self.shape in shapes else {**shapes, self.shape: {}},
            "device": self.hardware.device,
            "seed": self.seed,
            "protocol": dataclasses.asdict(self.protocol),
            "build_dir": self._build_dir(item),
            "energy": {
                "mode": self.energy,
                "min_window_s": self.hardware.min_energy_window_s or 0.0,
                "repeats": self.protocol.energy_repeats,
                "idle_window_s": IDLE_WINDOW_S,
            },
        }

    def _lane_env(self, lane: str | None) -> dict[str, str]:
        env = {
            "TRITON_CACHE_DIR": str(self.cache_dir / "triton"),
            "MAX_JOBS": "4",
            "CUDA_VISIBLE_DEVICES": lane if lane is not None else "",
        }
        if self.hardware.cuda_arch:
            env["TORCH_CUDA_ARCH_LIST"] = self.hardware.cuda_arch
        return env

    def _build_dir(self, item: EvalItem) -> str | None:
        """One build dir per CUDA source in the shared build cache; None for other backends."""
        if candidate_backend(item.candidate_source) != "cuda":
            return None
        return str(self.cache_dir / "torch_extensions" / source_sha(item.candidate_source)[:24])

    def _limits(self, device: str) -> Limits:
        p = self.protocol
        return Limits(
            p.compile_timeout_s,
            p.run_timeout_s,
            p.memory_limit_gb,
            p.num_threads,
            address_space_limit=device == "cpu",
        )

    def _base(self, item: EvalItem) -> dict:
        return dict(
            task_id=item.task.task_id,
            candidate=item.candidate,
            candidate_sha=source_sha(item.candidate_source),
            hardware=self.hardware.name,
            shape=self.shape if item.task.shapes else "default",  # "default": the file's own
            backend=candidate_backend(item.candidate_source),
        )

    def static_verdict(self, item: EvalItem) -> EvalRecord | None:
        """A record for a candidate that may not run (syntax error, static rule), else None."""
        try:
            violations = check_source(item.candidate_source)
        except SyntaxError as err:
            return EvalRecord(
                status="compile_error",
                **self._base(item),
                error=f"SyntaxError: {err.msg} (candidate line {err.lineno})",
            )
        if violations:
            more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
            return EvalRecord(status="static_reject", error=f"{violations[0]}{more}", **self._base(item))
        return None

    def compile(self, item: EvalItem) -> EvalRecord | None:
        """Build a CUDA candidate on the CPU; a record only for a definite build failure."""
        outcome = run_worker(self._request(item, "compile"), self._limits("cpu"), self._lane_env(None))
        result = outcome.result or {}
        if result.get("status") == "compile_error" and "Error building extension" in (
            result.get("error") or ""
        ):
            return EvalRecord(
                status="compile_error",
                error=result["error"],
                compile_s=result.get("compile_s"),
                wall_s=outcome.wall_s,
                **self._base(item),
            )
        return None  # built, or inconclusive without a GPU: the measuring worker decides

    def measure(self, item: EvalItem, worker: WorkerProcess | None = None) -> EvalRecord:
        """Run the full protocol for one item on `worker` (a fresh one-off worker if None)."""
        request = self._request(item, "measure")
        if worker is None:
            outcome = run_worker(request, self._limits(self.hardware.device), self._lane_env(self.lanes[0]))
        else:
            outcome = worker.submit(request)
        base = {**self._base(item), "wall_s": outcome.wall_s}
        failure = outcome.failure()
        if failure is not None:
            return EvalRecord(status=failure[0], error=failure[1], **base)
        fields = {k: outcome.result.get(k) for k in RESULT_FIELDS}
        if fields["status"] != "ok":
            return EvalRecord(**base, **fields)
        floor_ms = roofline_floor_ms(fields["flops"], fields["min_bytes"], self.hardware)
        fields["roofline_floor_ms"] = floor_ms
        reason = implausible_reason(fields["runtime_ms"], floor_ms, self.hardware)
        if reason:
            return EvalRecord(**base, **{**fields, "status": "implausible", "error": reason})
        return EvalRecord(
            **base,
            **fields,
            speedup=fields["ref_runtime_ms"] / fields["runtime_ms"],
            **self._energy(outcome.result, fields),
        )

    def _energy(self, result: dict, fields: dict) -> dict:
        """The record's energy fields under this evaluator's energy mode (never mixed)."""
        if self.energy == "none":
            return {"energy_source": "none"}
        if self.energy == "model":
            new = modelled_energy(self.hardware, fields["runtime_ms"], self.protocol.num_threads)
            ref = modelled_energy(self.hardware, fields["ref_runtime_ms"], self.protocol.num_threads)
            return dict(
                energy_j=new.energy_j,
                ref_energy_j=ref.energy_j,
                avg_power_w=new.avg_power_w,
                ref_avg_power_w=ref.avg_power_w,
                energy_source="model",
            )
        if result.get("energy_j") is None or result.get("ref_energy_j") is None:
            error = result.get("energy_error") or "the worker returned no nvml energy measurement"
            return {"energy_source": "none", "energy_error": error}
        return {"energy_source": self.energy, **{k: result.get(k) for k in MEASURED_ENERGY_FIELDS}}

    # --- result cache -------------------------------------------------------------------
    def result_key(self, item: EvalItem) -> str:
        key = {
            "v": PROTOCOL_VERSION,
            "task": item.task.path.read_text(),
            "shape": self.shape,
            "shapes": item.task.shapes,
            "candidate": source_sha(item.candidate_source),
            "hardware": dataclasses.asdict(self.hardware),
            "seed": self.seed,
            "protocol": {
                k: v
                for k, v in dataclasses.asdict(self.protocol).items()
                if k
                not in (
                    "task_file",
                    "candidate_files",
                    "candidates_dir",
                    "cache_dir",
                    "result_cache",
                    "compile_workers",
                    "gpus",
                )
            },
            "software": _software(),
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / "results" / key[:2] / f"{key}.json"

    def cached(self, key: str, item: EvalItem) -> EvalRecord | None:
        path = self._cache_path(key)
        if not self.protocol.result_cache or not path.exists():
            return None
        record = EvalRecord.from_json(path.read_text())
        return dataclasses.replace(record, candidate=item.candidate, task_id=item.task.task_id, cached=True)

    def store(self, key: str, record: EvalRecord) -> None:
        if not self.protocol.result_cache or record.status not in CACHEABLE:
            return
        path = self._cache_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(record.to_json())
        tmp.replace(path)

    # --- a batch ------------------------------------------------------------------------
    def evaluate(self, item: EvalItem) -> EvalRecord:
        return self.evaluate_many([item])[0]

    def evaluate_many(
        self, items: Iterable[EvalItem], on_record: Callable[[int, EvalRecord], None] | None = None
    ) -> list[EvalRecord]:
        """Records in the order of `items`; `on_record(index, record)` sees each as it arrives."""
        items = list(items)
        records: list[EvalRecord | None] = [None] * len(items)
        emit_lock = threading.Lock()

        def emit(i: int, record: EvalRecord) -> None:
            with emit_lock:
                records[i] = record
                if on_record is not None:
                    on_record(i, record)

        keys = [self.result_key(item) for item in items]
        first: dict[str, int] = {}
        duplicates: list[int] = []
        pending: deque[int] = deque()
        for i, item in enumerate(items):
            record = self.static_verdict(item) or self.cached(keys[i], item)
            if record is not None:
                self.store(keys[i], record)
                emit(i, record)
            elif keys[i] in first:
                duplicates.append(i)
            else:
                first[keys[i]] = i
                pending.append(i)

        with (
            ThreadPoolExecutor(self.compile_workers, thread_name_prefix="compile") as compile_pool,
            ThreadPoolExecutor(len(self.lanes), thread_name_prefix="lane") as lane_pool,
        ):
            builds: dict[int, Future] = {
                i: compile_pool.submit(self.compile, items[i])
                for i in pending
                if self.hardware.device == "cuda" and candidate_backend(items[i].candidate_source) == "cuda"
            }
            queue_lock = threading.Lock()

            def lane_loop(lane: str) -> None:
                worker = WorkerProcess(self._limits(self.hardware.device), self._lane_env(lane))
                try:
                    while True:
                        with queue_lock:
                            if not pending:
                                return
                            i = pending.popleft()
                        record = builds[i].result() if i in builds else None
                        record = record or self.measure(items[i], worker)
                        self.store(keys[i], record)
                        emit(i, record)
                finally:
                    worker.close()

            for future in [lane_pool.submit(lane_loop, lane) for lane in self.lanes]:
                future.result()
        for i in duplicates:
            emit(i, dataclasses.replace(records[first[keys[i]]], candidate=items[i].candidate, cached=True))
        return records


def _ram_gb() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3)
    except (ValueError, OSError):
        return 8
