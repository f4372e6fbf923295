"""What the trusted worker does before any candidate code runs, for one Session
(warpk.evaluator.session): the task's reference probed here, and the reference worker timed
alone (the baseline the interleaved batches are compared with, warpk.evaluator.timing_phase).
Nothing of the candidate has run yet, so nothing it does can change either: a failure here is
the task's or the harness's, and the times are the reference's own.

Non-goals: no protocol order (Session.run), no timing statistics (timing_phase).
"""

from __future__ import annotations

import secrets
import statistics
import time

from warpk.evaluator import timing_phase as tp
from warpk.evaluator.errors import HarnessError
from warpk.evaluator.freeze import still_or_gone
from warpk.evaluator.link import BIG_IO_BYTES
from warpk.evaluator.reference import GuardedSide
from warpk.evaluator.steps import work_of


def probe_reference(session) -> None:
    """The reference built and run here before any candidate code runs (once per task, shape
    and lane): what the task needs is known before a candidate could hold the device's
    memory, so `too_big` is the task's and never a candidate's doing; its pace (a call's
    time, its outputs' and I/O's sizes) sizes the baseline's batches."""
    key = (session.request.task_source, session.request.shape)
    if key in session.references.probed:
        return
    session.phase = "build"
    times = []
    with session.torch.no_grad():
        session.reference = session.make_reference(secrets.randbits(31), list(session.task.get_init_inputs()))
        for _ in range(4):  # the first warms up; one set of inputs and outputs at a time
            inputs = out = None
            inputs = session.inputs(secrets.randbits(63))
            start = time.perf_counter()
            out = session.run_reference(inputs)
            session.dev.sync()
            times.append(time.perf_counter() - start)
        session.size_outputs(out)
        io_bytes = work_of(session.torch, session.reference, session.run_reference, inputs).io_bytes
    session.reference = inputs = out = None
    session.references.probed[key] = (statistics.median(times[1:]), max(times), io_bytes,
                                      session.out_bytes, session.out_count)


def reference_baseline(session) -> tp.Baseline | None:
    """The reference worker timed alone before any candidate code runs, back to back, the
    candidate's idle harness and the worker started ahead frozen (timing_phase.Baseline);
    once a minute per task, shape and lane. None where no sandbox was started."""
    key = (session.request.task_source, session.request.shape)
    if not session.request.candidate_pid or (cached := session.references.alone.fresh(key)):
        return cached if session.request.candidate_pid else None
    session.phase = "baseline"
    try:
        session.ref_worker.wait_loaded(session.s.compile_timeout_s)
    except RuntimeError as err:
        session.references.discard()
        raise HarnessError(str(err)) from err
    session.build_reference_worker(secrets.randbits(31), list(session.task.get_init_inputs()))
    call_s, most_s, io_bytes, out_bytes, out_count = session.references.probed[key]
    ref = session.ref_link
    ref.ref_call_s, ref.out_bytes, ref.out_count = most_s, out_bytes, out_count
    k = tp.calls_per_batch(call_s, io_bytes, session.s.batch_target_ms, session.s.batch_memory_bytes)
    big = io_bytes > BIG_IO_BYTES
    ref.phase = "baseline"
    session.spare = still_or_gone(session.spare)
    try:
        with session.pool.hold():
            ms = tp.reference_alone(GuardedSide(ref, session.reference_side), session.inputs, k,
                                    tp.alone_batches(session.s.timing_batches), big)
    finally:
        session.spare.thaw()
    baseline = tp.Baseline(k, ms, big)
    session.references.alone.add(key, baseline)
    return baseline
