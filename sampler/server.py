"""The gRPC services: Health.Check and Sampler.StreamSamples, over one backend.

Each stream reads the backend at its own interval (deadline pacing, no drift; a tick that falls
behind is skipped, never burst) and sends one message per `batch_ticks` ticks. A bad request
(interval 0, an unknown GPU or metric) is answered with INVALID_ARGUMENT and hurts no other
stream. A client that goes away ends its stream at once (the RPC's termination callback wakes
it). `Daemon.stop()` (SIGTERM, SIGINT) ends every stream with UNAVAILABLE (so a client can tell
a shutdown from the end of a bounded stream) and closes the backend.

Non-goals: no authentication or TLS (bind loopback, the default); no fan-out cache shared
between streams (each stream reads NVML itself; NVML is thread-safe); no GPU setting is changed.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc

from sampler import sampler_pb2 as pb
from sampler import sampler_pb2_grpc as pb_grpc
from sampler.trace import METRICS

MAX_INTERVAL_MS = 60_000


class _Streams:
    """The wake-up events of the live streams, so a shutdown can end them all."""

    def __init__(self):
        self._lock = threading.Lock()
        self._events: set[threading.Event] = set()
        self.closing = threading.Event()

    def open(self) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._events.add(event)
        if self.closing.is_set():
            event.set()
        return event

    def close(self, event: threading.Event) -> None:
        with self._lock:
            self._events.discard(event)

    def stop_all(self) -> None:
        self.closing.set()
        with self._lock:
            for event in self._events:
                event.set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)


def _sample(backend, gpu: int, seq: int, metrics: frozenset[str]) -> pb.Sample:
    values, errors = backend.read(gpu, metrics)
    return pb.Sample(
        gpu=gpu, seq=seq, monotonic_s=time.monotonic(), unix_time_s=time.time(),
        errors=[pb.MetricError(metric=m, code=c, message=msg) for m, c, msg in errors],
        **values,
    )


class SamplerService(pb_grpc.SamplerServicer):
    def __init__(self, backend, default_interval_ms: int, streams: _Streams):
        self.backend = backend
        self.default_interval_ms = default_interval_ms
        self.streams = streams

    def _check(self, request: pb.StreamRequest) -> tuple[float, tuple[int, ...], frozenset[str]] | str:
        """(interval_s, gpus, metrics), or the reason the request is invalid."""
        interval_ms = request.interval_ms if request.HasField("interval_ms") else self.default_interval_ms
        if not 1 <= interval_ms <= MAX_INTERVAL_MS:
            return f"interval_ms={interval_ms}: must be between 1 and {MAX_INTERVAL_MS}"
        unknown = [g for g in request.gpus if g not in self.backend.gpus]
        if unknown:
            return f"gpus {unknown} not served; this daemon serves {list(self.backend.gpus)}"
        bad = [m for m in request.metrics if m not in METRICS]
        if bad:
            return f"unknown metrics {bad}; known: {', '.join(METRICS)}"
        if request.duration_s < 0:
            return f"duration_s={request.duration_s} must be >= 0"
        gpus = tuple(dict.fromkeys(request.gpus)) or self.backend.gpus
        return interval_ms / 1000.0, gpus, frozenset(request.metrics or METRICS)

    def StreamSamples(self, request, context):
        checked = self._check(request)
        if isinstance(checked, str):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, checked)
        interval_s, gpus, metrics = checked
        wake = self.streams.open()
        context.add_callback(wake.set)  # the client went away or the RPC ended
        try:
            yield from self._ticks(request, interval_s, gpus, metrics, wake)
        finally:
            self.streams.close(wake)
        if self.streams.closing.is_set():  # cut short by a shutdown, not by the client or a bound
            context.abort(grpc.StatusCode.UNAVAILABLE, "sampler daemon shutting down")

    def _ticks(self, request, interval_s, gpus, metrics, wake):
        batch_ticks = max(1, request.batch_ticks)
        start = next_t = time.monotonic()
        batch, tick = [], 0
        while not wake.is_set():
            batch.extend(_sample(self.backend, g, tick, metrics) for g in gpus)
            tick += 1
            done = (request.max_ticks and tick >= request.max_ticks) or (
                request.duration_s and time.monotonic() - start >= request.duration_s)
            if done or tick % batch_ticks == 0:
                yield pb.SampleBatch(samples=batch)
                batch = []
            if done:
                return
            next_t += interval_s
            now = time.monotonic()
            if next_t < now:  # fell behind (slow backend or client): skip, do not burst
                next_t = now
            wake.wait(next_t - now)
        if batch:
            yield pb.SampleBatch(samples=batch)


class HealthService(pb_grpc.HealthServicer):
    def __init__(self, backend, default_interval_ms: int, streams: _Streams):
        self.backend = backend
        self.default_interval_ms = default_interval_ms
        self.streams = streams
        self.started = time.monotonic()
        self.gpu_names = backend.gpu_names()

    def Check(self, request, context):
        return pb.HealthResponse(
            status="STOPPING" if self.streams.closing.is_set() else "SERVING",
            backend=self.backend.name, gpus=list(self.backend.gpus), gpu_names=self.gpu_names,
            default_interval_ms=self.default_interval_ms, active_streams=len(self.streams),
            uptime_s=time.monotonic() - self.started, metrics=list(METRICS),
        )


class Daemon:
    """A started gRPC server over `backend`.

    Args:
        backend: a sampler backend (sampler.backends).
        addr: host:port to bind; port 0 picks a free port (see `.port`).
        default_interval_ms: interval of a request that does not set one.
        max_streams: concurrent RPCs served; more are refused with RESOURCE_EXHAUSTED.
    """

    def __init__(self, backend, addr: str = "127.0.0.1:50052", default_interval_ms: int = 100,
                 max_streams: int = 32):
        self.backend = backend
        self.streams = _Streams()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_streams + 2,
                                                             thread_name_prefix="sampler-rpc"),
                                  maximum_concurrent_rpcs=max_streams)
        pb_grpc.add_SamplerServicer_to_server(
            SamplerService(backend, default_interval_ms, self.streams), self.server)
        pb_grpc.add_HealthServicer_to_server(
            HealthService(backend, default_interval_ms, self.streams), self.server)
        self.port = self.server.add_insecure_port(addr)
        if self.port == 0:
            raise OSError(f"cannot bind {addr}")
        self.host = addr.rsplit(":", 1)[0]
        self.server.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, grace_s: float = 1.0) -> None:
        """End every stream, stop serving, close the backend. Idempotent."""
        self.streams.stop_all()
        self.server.stop(grace_s).wait()
        self.backend.close()
