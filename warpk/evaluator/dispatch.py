"""Dispatch: compile CUDA candidates on CPU cores while every lane measures, one at a time.

CUDA candidates (any torch.utils.cpp_extension build, host-only C++ included, on a GPU or
the CPU) are built first by a pool of sandboxed compile workers (GPU hidden) on the cores no
lane times on, into the build cache, one folder per source hash; a definite build failure is
the candidate's record without ever occupying a lane. Each lane (warpk.evaluator.lane) takes
the next item whose build is done, in order, and measures it. A worker that crashes costs that
one record.

One build folder is a channel between every sandbox that mounts it read-write: a compile
worker importing one item while a lane timed another item of the same source (same folder) did
half of each timed call for it through a shared file, 1.25x for a copy (red team round 6). So
no two sandboxes of one folder ever live at once: building and measuring an item hold an
exclusive lock on the folder (`folder_alone`, a flock on a file beside it that no sandbox
mounts, so other processes sharing the cache wait too).

A harness failure (HarnessFailure from a lane, or any exception escaping a lane or a build: our
bug, not the candidate's) stops the dispatch: no lane takes another item, builds not started yet
are cancelled, and once the items in flight are done the first failure is raised, naming its
task. Its item gets no record (nothing of it is cached or scored).

Non-goals: no verdict logic (warpk.evaluator.trusted), no caching (warpk.evaluator.cache).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from warpk.evaluator import protocol as wire
from warpk.evaluator.assemble import record_from
from warpk.evaluator.energy import IDLE_WINDOW_S
from warpk.evaluator.errors import HarnessFailure
from warpk.evaluator.lane import Lane, compile_candidate
from warpk.evaluator.link import candidate_text
from warpk.evaluator.resources import describe, lane_cores
from warpk.evaluator.roofline import best_peak_tflops
from warpk.evaluator.sandbox import Limits
from warpk.records import EvalRecord


@contextlib.contextmanager
def folder_alone(build_dir: Path | None):
    """While held, no other sandbox of `build_dir` is alive (see the module doc): an exclusive
    flock on `<build_dir>.lock` beside it (a path no sandbox mounts), taken by each build and
    each measurement of a candidate with a build folder, in this process or another."""
    if build_dir is None:
        yield
        return
    # the folder of build dirs only its owner enters: a sandbox's uid 0 is the host's where the
    # evaluator runs as root, and a set-uid file it left in its build dir ran as root for any
    # user who could reach it (red team round 69); no sandbox mounts this folder, only its children
    build_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if build_dir.parent.stat().st_uid == os.geteuid():  # a shared cache's is its owner's business
        os.chmod(build_dir.parent, 0o700)
    fd = os.open(build_dir.parent / f"{build_dir.name}.lock",
                 os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class Dispatcher:
    def __init__(self, evaluator):
        self.ev = evaluator
        p, hw = evaluator.protocol, evaluator.hardware
        self.settings = wire.Settings(
            correctness_trials=p.correctness_trials,
            timing_batches=p.timing_batches,
            batch_target_ms=p.batch_target_ms,
            batch_memory_bytes=int(p.batch_memory_gb * 1024**3),
            tolerance_fp32=p.tolerance_fp32,
            tolerance_low_precision=p.tolerance_low_precision,
            num_threads=p.num_threads,
            compile_timeout_s=p.compile_timeout_s,
            run_timeout_s=p.run_timeout_s,
            run_timeout_factor=p.run_timeout_factor,
        )
        self.limits = Limits(p.memory_limit(), p.num_threads, address_space_limit=hw.device == "cpu")
        self.lane_cores = [lane_cores(i, p.num_threads) for i in range(len(evaluator.lanes))]
        # builds run on the cores no lane times on (all of them where the lanes take every core)
        taken = {c for cores in self.lane_cores for c in cores}
        self.compile_cores = tuple(sorted(set(os.sched_getaffinity(0)) - taken))
        self.energy_spec = None
        if evaluator.energy in ("nvml", "sampler"):
            self.energy_spec = wire.EnergySpec(hw.min_energy_window_s or 0.0, p.energy_repeats, IDLE_WINDOW_S,
                                               hw.energy_rel_uncertainty,
                                               p.sampler_addr if evaluator.energy == "sampler" else None,
                                               best_peak_tflops(hw), hw.mem_bandwidth_gb_s)
        self.env = {"MAX_JOBS": "4"}
        if hw.cuda_arch:
            self.env["TORCH_CUDA_ARCH_LIST"] = hw.cuda_arch

    def build_dir(self, p) -> Path | None:
        if p.backend != "cuda":
            return None
        return self.ev.cache_dir / "torch_extensions" / p.sha[:24]

    def request(self, p) -> wire.MeasureRequest:
        shapes = {"gpu": {}, **p.item.task.shapes}
        if self.ev.shape not in shapes:
            shapes[self.ev.shape] = {}
        return wire.MeasureRequest(
            task_source=p.task_source,
            shape=self.ev.shape,
            shapes=shapes,
            device=self.ev.hardware.device,
            candidate_source=p.item.candidate_source,
            settings=self.settings,
            # a Triton kernel compiles at its first call; an extension may be built in __init__ or
            # on first use (honest: tests/data/honest), after the compile pool's import
            first_call_timeout_s=self.settings.compile_timeout_s if p.backend in ("triton", "cuda") else 0.0,
            energy=self.energy_spec,
        )

    def compile(self, p) -> EvalRecord | None:
        """A record only for a definite build failure; None = built, or let the lane decide."""
        limits = dataclasses.replace(self.limits, cores=self.compile_cores)  # off the lanes' cores
        with folder_alone(self.build_dir(p)):
            reply, _ = compile_candidate(p.item.candidate_source, self.build_dir(p), limits, self.env,
                                         self.ev.sandbox, self.settings.compile_timeout_s, "cuda")
        if reply is not None and reply.status == "compile_error" and "Error building extension" in (
            reply.error or ""
        ):
            return EvalRecord(status="compile_error", error=candidate_text(reply.error),
                              compile_s=reply.seconds, sandbox=self.ev.sandbox, limits=describe(), **p.base)
        return None

    def backstop_s(self) -> float:
        s = self.settings
        return s.compile_timeout_s * 2 + s.run_timeout_s * (s.correctness_trials + s.timing_batches + 10) * 4

    def measure(self, lane: Lane, p) -> EvalRecord:
        with folder_alone(self.build_dir(p)):
            outcome = lane.measure(self.request(p), self.build_dir(p), self.backstop_s())
        base = {**p.base, "wall_s": outcome.wall_s, "sandbox": outcome.sandbox, "limits": describe()}
        ev = self.ev
        return record_from(outcome.measurement, base, ev.hardware, ev.energy, self.settings.num_threads)

    def run(self, pending: list, done: Callable) -> None:
        """Measure `pending`, calling `done(p, record)` as records arrive; HarnessFailure stops it."""
        queue: deque = deque(pending)
        lock = threading.Lock()
        failures: list[HarnessFailure] = []
        warm = self.ev.warm
        with (
            warm.lease(len(self.ev.lanes)) as kept_threads,  # None: another call holds the kept lanes
            contextlib.ExitStack() as own,
            ThreadPoolExecutor(self.ev.compile_workers, thread_name_prefix="compile") as compile_pool,
        ):
            lane_pool = kept_threads or own.enter_context(
                ThreadPoolExecutor(len(self.ev.lanes), thread_name_prefix="lane"))
            builds: dict[int, Future] = {
                p.index: compile_pool.submit(self.compile, p)
                for p in pending
                if p.backend == "cuda"
            }

            def stop(p, err: BaseException) -> None:
                """Record the first failure; no lane takes another item, no new build starts."""
                why = str(err) if isinstance(err, HarnessFailure) else f"{type(err).__name__}: {err}"
                where = (f"on task {p.base['task_id']} (candidate {p.base['candidate']}); nothing of it was "
                         "scored" if p else "starting a lane")
                failure = HarnessFailure(" ".join(f"the evaluator failed {where}: {why}".split())[:800])
                failure.__cause__ = err  # the traceback, for whoever debugs it; the line is for the user
                with lock:
                    failures.append(failure)
                    queue.clear()
                for build in builds.values():
                    build.cancel()

            def lane_loop(index: int, gpu: str) -> None:
                p = lane = None
                try:  # each lane's candidates and reference worker on cores of its own
                    lane = warm.take(index) if kept_threads else None  # warm from an earlier call
                    if lane is None:
                        limits = dataclasses.replace(self.limits, cores=self.lane_cores[index])
                        lane = Lane(gpu or None, self.ev.sandbox, limits, self.env, self.compile_cores)
                    while True:
                        with lock:
                            if not queue:
                                break
                            p = queue.popleft()
                        record = builds[p.index].result() if p.index in builds else None
                        record = record or self.measure(lane, p)
                        with lock:
                            done(p, record)
                    if kept_threads:
                        lane, finished = None, lane
                        warm.keep(index, finished)  # for the next call
                except Exception as err:  # noqa: BLE001 - ours, not the candidate's: stop the run
                    stop(p, err)
                finally:
                    if lane is not None:  # a failed lane is not kept
                        lane.close()

            for future in [lane_pool.submit(lane_loop, i, gpu) for i, gpu in enumerate(self.ev.lanes)]:
                future.result()
        if failures:
            raise failures[0]
