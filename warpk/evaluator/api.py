"""The Evaluator and its items (the package's front: its docstring, warpk/evaluator/__init__.py,
says what it does). Kept apart from the package's __init__ so that a worker importing one module
of the package (warpk.evaluator.untrusted, .trusted) does not load the Evaluator's own
dependencies (warpk.config, the cache, the pre-filter, tasks): 0.17 s of CPU a sandboxed worker,
2026-12-07."""


from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator.cache import ResultCache, default_cache_dir, result_key
from warpk.evaluator.errors import HarnessFailure
from warpk.evaluator.remote import raise_open_files, say_fd_passing
from warpk.evaluator.resources import say_if_unavailable
from warpk.evaluator.sandbox import resolve_sandbox
from warpk.evaluator.static import backend_of, check_tree
from warpk.hardware import resolve_energy, usable_cores
from warpk.records import EvalRecord
from warpk.tasks import Task

__all__ = ["EvalItem", "Evaluator", "HarnessFailure", "Prepared", "default_cache_dir", "source_sha"]


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


@dataclass(frozen=True)
class Prepared:
    """An item with what is known before anything runs: parsed, hashed and pre-filtered once."""

    index: int
    item: EvalItem
    task_source: str
    sha: str
    backend: str
    key: str
    base: dict  # the record fields every verdict of this item carries
    verdict: EvalRecord | None  # the static pre-filter's, when it refused the item


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
        self.energy = resolve_energy(protocol.energy, hardware.device, hardware.name,
                                     sampler_addr=protocol.sampler_addr)
        self.cache_dir = Path(protocol.cache_dir) if protocol.cache_dir else default_cache_dir()
        # private (no sandbox mounts it: red team round 24) before the preflight (round 25)
        self.sandbox = resolve_sandbox(protocol.sandbox, self.cache_dir)
        say_if_unavailable()  # the cgroup limits (warpk.evaluator.resources); records say which
        say_fd_passing(raise_open_files())  # the trusted side's fd passing (warpk.evaluator.remote)
        self.seed = seed
        self.cache = ResultCache(self.cache_dir, protocol.result_cache)
        self.lanes = lanes if lanes is not None else self._default_lanes()
        cores = usable_cores()
        auto_workers = max(1, min(cores - len(self.lanes), _ram_gb() // 8))
        self.compile_workers = protocol.compile_workers or auto_workers
        # Lanes kept between calls (warpk.evaluator.dispatch): their trusted worker, reference
        # worker and next candidate's worker already started, torch imported, so the next call (a
        # GRPO step's batch) starts warm. Closed by close(), or when this evaluator is collected
        # or the process exits.
        self.warm = WarmLanes()
        self._finalizer = weakref.finalize(self, self.warm.close)

    def close(self) -> None:
        """Stop the workers kept between calls (a later call starts new ones)."""
        self.warm.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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

    def prepare(self, index: int, item: EvalItem) -> Prepared:
        task_source = item.task.path.read_text()
        sha = source_sha(item.candidate_source)
        base = dict(
            task_id=item.task.task_id,
            candidate=item.candidate,
            candidate_sha=sha,
            hardware=self.hardware.name,
            shape=self.shape if item.task.shapes else "default",  # "default": the file's own
        )
        # the energy mode as resolved: auto means nvml on one machine and sampler on another
        protocol = dataclasses.replace(self.protocol, energy=self.energy)
        key = result_key(task_source, self.shape, item.task.shapes, sha, self.hardware, protocol, self.seed)
        try:
            tree = ast.parse(item.candidate_source)
            backend = backend_of(tree)
            violations = check_tree(tree)
        except SyntaxError as err:
            verdict = EvalRecord(status="compile_error", backend="torch", **base,
                                 error=f"SyntaxError: {err.msg} (candidate line {err.lineno})")
            return Prepared(index, item, task_source, sha, "torch", key, base, verdict)
        except (RecursionError, MemoryError, ValueError) as err:  # sources built to break the parser
            verdict = EvalRecord(status="static_reject", backend="torch", **base,
                                 error=f"the source cannot be parsed safely ({type(err).__name__})")
            return Prepared(index, item, task_source, sha, "torch", key, base, verdict)
        base["backend"] = backend
        verdict = None
        if violations:
            more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
            verdict = EvalRecord(status="static_reject", error=f"{violations[0]}{more}", **base)
        return Prepared(index, item, task_source, sha, backend, key, base, verdict)

    def measure(self, item: EvalItem) -> EvalRecord:
        """One item through the sandboxed workers with no static pre-filter and no cache: what
        the process boundary alone decides (tests, red-teaming)."""
        from warpk.evaluator.dispatch import Dispatcher

        p = dataclasses.replace(self.prepare(0, item), verdict=None)
        out: list[EvalRecord] = []
        Dispatcher(self).run([p], lambda _, record: out.append(record))
        return out[0]

    def evaluate(self, item: EvalItem) -> EvalRecord:
        return self.evaluate_many([item])[0]

    def evaluate_many(
        self, items: Iterable[EvalItem], on_record: Callable[[int, EvalRecord], None] | None = None
    ) -> list[EvalRecord]:
        """Records in the order of `items`; `on_record(index, record)` sees each as it arrives.
        Raises HarnessFailure (one line, naming the task) when the evaluator itself failed: the
        records that arrived before it were emitted, the failed item's never is."""
        from warpk.evaluator.dispatch import Dispatcher

        prepared = [self.prepare(i, item) for i, item in enumerate(items)]
        records: list[EvalRecord | None] = [None] * len(prepared)
        first: dict[str, int] = {}
        duplicates, pending = [], []

        def emit(i: int, record: EvalRecord) -> None:
            records[i] = record
            if on_record is not None:
                on_record(i, record)

        for p in prepared:
            record = p.verdict or self.cache.get(p.key, p.item.candidate, p.item.task.task_id)
            if record is not None:
                self.cache.put(p.key, record)
                emit(p.index, record)
            elif p.key in first:
                duplicates.append(p)
            else:
                first[p.key] = p.index
                pending.append(p)

        def done(p: Prepared, record: EvalRecord) -> None:
            self.cache.put(p.key, record)
            emit(p.index, record)

        Dispatcher(self).run(pending, done)
        for p in duplicates:
            emit(p.index, dataclasses.replace(records[first[p.key]], candidate=p.item.candidate, cached=True))
        return records


class WarmLanes:
    """The lanes an evaluator keeps between calls, by index, and the threads that drive them:
    a worker started by a thread dies with that thread (bwrap's --die-with-parent is a
    parent-death signal, sent when the thread that forked it exits), so the threads stay too.
    One call at a time holds them (`lease`); a call made meanwhile (from an `on_record`, or
    another thread) gets lanes and threads of its own, closed after it."""

    def __init__(self):
        self.lanes: dict = {}
        self.pool: ThreadPoolExecutor | None = None
        self.lock = threading.Lock()
        self.busy = False  # a call holds the lanes
        self.closing = False  # close() came during that call: its lanes are closed at its end

    @contextlib.contextmanager
    def lease(self, n: int):
        """The kept lanes' threads (n of them) for one call, or None while another call holds them."""
        with self.lock:
            held = not self.busy
            if held:
                self.busy = True
                if self.pool is None:  # never replaced while lanes live: their workers would die
                    self.pool = ThreadPoolExecutor(n, thread_name_prefix="lane")
            pool = self.pool if held else None
        try:
            yield pool
        finally:
            if held:
                with self.lock:
                    self.busy, closing, self.closing = False, self.closing, False
                if closing:
                    self.close()

    def take(self, index: int):
        """The lane kept for `index`, or None (only while holding the lease)."""
        with self.lock:
            return self.lanes.pop(index, None)

    def keep(self, index: int, lane) -> None:
        """Keep `lane` for the next call, unless close() came meanwhile or one is kept already."""
        with self.lock:
            if not self.closing and index not in self.lanes:
                self.lanes[index] = lane
                return
        lane.close()

    def close(self) -> None:
        with self.lock:
            lanes, self.lanes = list(self.lanes.values()), {}
            pool = None
            if self.busy:
                self.closing = True  # the call in flight closes its lanes and these threads
            else:
                pool, self.pool = self.pool, None
        for lane in lanes:
            lane.close()
        if pool is not None:
            pool.shutdown(wait=False)


def _ram_gb() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3)
    except (ValueError, OSError):
        return 8
