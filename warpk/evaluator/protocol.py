"""Typed messages between the parent, the trusted worker and the untrusted worker, and their wire.

Every message is a frozen dataclass sent as one frame on a Unix stream socket: a 4-byte length,
then UTF-8 JSON `{"type": <class name>, **fields}`, with at most one file descriptor attached (a
sealed memfd holding tensor bytes, warpk.evaluator.transport). JSON only: nothing that arrives
from the untrusted worker is ever unpickled, and `decode` accepts only the message types the
receiver expects, with the field types they declare (a forged or malformed frame raises
`ProtocolError`, which the trusted side turns into the candidate's verdict).

Non-goals: no torch, no I/O policy (timeouts belong to the caller: `recv(timeout_s=...)`).
"""

from __future__ import annotations

import json
import socket
import struct
import time
import typing
from dataclasses import dataclass, field

from warpk.evaluator.codec import PeerClosed, PeerTimeout, ProtocolError, build, plain
from warpk.evaluator.fds import dispose, recv_some

__all__ = ["PeerClosed", "PeerTimeout", "ProtocolError", "dispose"]  # defined with the codec, fds

MAX_FRAME_BYTES = 64 * 1024 * 1024
_LENGTH = struct.Struct("!I")


# --- values ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorSpec:
    """A contiguous tensor at `offset` in the frame's memfd."""

    offset: int
    dtype: str  # torch dtype name without "torch.", e.g. "float32"
    shape: list[int]


@dataclass(frozen=True)
class Arg:
    """One positional argument: a tensor in the memfd, or a JSON value (int, float, list...)."""

    tensor: TensorSpec | None = None
    value: typing.Any = None


# --- trusted -> untrusted ---------------------------------------------------------------------
@dataclass(frozen=True)
class Load:
    """Import the candidate (CUDA extensions build here)."""

    candidate_source: str
    device: str  # "cpu" | "cuda"
    num_threads: int
    compile_only: bool = False


@dataclass(frozen=True)
class Build:
    """Construct ModelNew(*init_args) under torch.manual_seed(seed) (the reference's seed)."""

    seed: int
    init_args: list[Arg]


@dataclass(frozen=True)
class Stage:
    """Get ready for the next Go: finish what the last one left (unmapping, freeing) and allocate
    where its outputs will go. Answered only once that is done, so none of it overlaps what is
    timed next. Carries no inputs: nothing of the next call can be computed here."""

    output_bytes: int = 0  # what the reference's outputs of the next Go take: allocated ahead
    device_memory: bool = False  # the next Go's inputs and outputs travel as CUDA VMM fds
    #                              (warpk.evaluator.cudashare), not memfds


@dataclass(frozen=True)
class Go:
    """Run these calls (their inputs in the attached fd), synchronise, send the outputs (and the
    inputs, if asked). The trusted clock runs from sending this to holding copies of the outputs;
    the answer must echo `nonce`."""

    calls: list[list[Arg]]
    nonce: str
    return_inputs: bool = False
    poison: bool = False
    repeat: int = 0  # > 0: an energy loop of this many calls over the inputs, last output only
    release: bool = False  # once the answer is sent, give freed device memory back (huge tasks:
    #                        the trusted side needs it next)


@dataclass(frozen=True)
class Quit:
    pass


# --- untrusted -> trusted ---------------------------------------------------------------------
@dataclass(frozen=True)
class Reply:
    """Answer to Load / Build / Stage: ok, or a failure status and its one-line reason."""

    status: str  # ok | compile_error | runtime_error | crashed | static_reject
    error: str | None = None
    seconds: float | None = None  # how long the step took inside the worker


@dataclass(frozen=True)
class Ran:
    """Answer to Go. Outputs (and inputs if asked) are in the worker's memory (CPU), or in a memfd
    or CUDA VMM fd of the worker's, `outbox_fd` its number there, which the trusted side takes a
    copy of (warpk.evaluator.remote.take_fd): workers never pass fds."""

    status: str
    error: str | None = None
    nonce: str = ""  # the Go's, echoed: an answer written before its Go cannot carry it
    outputs: list[list[TensorSpec]] = field(default_factory=list)
    inputs_after: list[list[TensorSpec]] = field(default_factory=list)
    outbox_fd: int | None = None


UNTRUSTED_REPLIES = (Reply, Ran)


# --- parent <-> trusted ------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """The measurement protocol (from EvaluateConfig), as the trusted worker needs it."""

    correctness_trials: int
    timing_batches: int
    batch_target_ms: float
    batch_memory_bytes: int
    tolerance_fp32: float
    tolerance_low_precision: float
    num_threads: int
    compile_timeout_s: float
    run_timeout_s: float  # floor of every run step's limit
    run_timeout_factor: float  # x the reference's time for the same calls


@dataclass(frozen=True)
class EnergySpec:
    """evaluate.energy=nvml|sampler: how the trusted worker measures both on the GPU's energy
    counter (read directly through NVML, or streamed by the sampler daemon at `sampler_addr`,
    which also records the lane's telemetry during the candidate's measurement)."""

    min_window_s: float
    repeats: int  # rounds at most
    idle_window_s: float
    rel_uncertainty: float = 0.0  # stop once both sides are this precise (0: exactly `repeats`)
    sampler_addr: str | None = None  # None: NVML read here
    # the profile's best peaks (warpk.evaluator.roofline): the energy batches' physical floor
    peak_tflops: float = 0.0
    mem_bandwidth_gb_s: float = 0.0


@dataclass(frozen=True)
class MeasureRequest:
    """Measure one candidate; the untrusted worker's socket comes attached."""

    task_source: str
    shape: str
    shapes: dict[str, typing.Any]  # shape name -> module-constant overrides
    device: str
    candidate_source: str
    settings: Settings
    first_call_timeout_s: float  # Build and first forward may compile (Triton, extensions)
    energy: EnergySpec | None = None  # None: no measured energy
    sandbox: str = "process"  # bwrap | process (the reference worker's too: reference.py)
    gpu: str | None = None  # the lane's GPU (CUDA_VISIBLE_DEVICES value), None on the CPU
    memory_limit_gb: float = 0.0  # 0: no RLIMIT_AS for the reference worker
    cores: list[int] = field(default_factory=list)  # the lane's cpuset (resources.py)
    candidate_pid: int | None = None  # the root of the candidate's sandbox (freeze.py)
    spare_pid: int | None = None  # the next candidate's worker, importing torch: frozen while timed


@dataclass(frozen=True)
class Measurement:
    """What the trusted worker found. `None` = not measured."""

    status: str
    error: str | None = None
    phase: str | None = None  # where it failed: load | build | correctness | timing | energy | other shapes
    device: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    runtime_ms: float | None = None  # median over batches of the candidate's time per call
    runtime_iqr_ms: float | None = None
    ref_runtime_ms: float | None = None
    ref_runtime_iqr_ms: float | None = None
    speedup: float | None = None  # median of the ratios of pairs of batches (one of either order)
    speedup_low: float | None = None  # its distribution-free 95% interval
    speedup_high: float | None = None
    calls_per_batch: int | None = None
    batches: int | None = None
    freeze: str | None = None  # how the candidate was kept still while the reference was timed
    ref_alone_runtime_ms: float | None = None  # the reference before any candidate code ran, and
    ref_contention: float | None = None  # interleaved / alone (> 1: slowed while it existed)
    new_alone_runtime_ms: float | None = None  # the candidate back to back, where contention was
    basis: str | None = None  # which ratio the speedup is then: interleaved | alone
    ref_alone_after_runtime_ms: float | None = None  # diagnostic: the reference alone after those
    interleaved_speedup: float | None = None  # diagnostic: the ratio taking turns, where slowed
    flops: float | None = None
    min_bytes: float | None = None
    io_bytes: float | None = None  # inputs + outputs of one call
    compile_s: float | None = None
    correctness_s: float | None = None
    timing_s: float | None = None
    energy_j: float | None = None  # NVML, measured by the trusted worker (energy per call)
    energy_uncertainty_j: float | None = None
    avg_power_w: float | None = None
    window_s: float | None = None
    ref_energy_j: float | None = None
    ref_energy_uncertainty_j: float | None = None
    ref_avg_power_w: float | None = None
    ref_window_s: float | None = None
    idle_power_w: float | None = None
    energy_windows: int | None = None  # windows measured
    energy_at_cap: bool | None = None  # stopped at the windows' cap short of the target uncertainty
    ref_energy_windows: int | None = None
    ref_energy_at_cap: bool | None = None
    ref_energy_id: str | None = None  # which of the lane's reference measurements was used
    energy_error: str | None = None  # why a requested measurement gave no energy
    energy_s: float | None = None
    # evaluate.energy=sampler: the lane during the candidate's timing and energy windows
    # (warpk.telemetry.lane.LaneTelemetry); lane_error says why there is none
    lane_samples: int | None = None
    lane_span_s: float | None = None
    lane_power_source: str | None = None
    lane_power_mean_w: float | None = None
    lane_power_max_w: float | None = None
    lane_sm_clock_mean_mhz: float | None = None
    lane_sm_clock_min_mhz: int | None = None
    lane_temperature_max_c: int | None = None
    lane_throttle_reasons: int | None = None
    lane_error: str | None = None


@dataclass(frozen=True)
class Ready:
    """The trusted worker's first message: torch imported, requests are taken. The lane waits for it
    before it takes the machine's lane lock, so a new lane's start is never inside another run's
    wait (warpk.evaluator.lane)."""


TRUSTED_REPLIES = (Measurement,)
TYPES = {t.__name__: t for t in (Load, Build, Stage, Go, Quit, Reply, Ran, MeasureRequest, Measurement,
                                 Ready)}


# --- encoding (warpk.evaluator.codec) ------------------------------------------------------
def decode(raw: dict, expected: tuple[type, ...]):
    """The message in `raw` if it is one of `expected`, else ProtocolError."""
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise ProtocolError("a frame without a message type")
    cls = TYPES.get(raw["type"])
    if cls not in expected:
        raise ProtocolError(f"unexpected message {raw['type'][:40]!r}")
    try:
        return build(cls, {k: v for k, v in raw.items() if k != "type"}, cls.__name__)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as err:
        raise ProtocolError(f"{cls.__name__}: {type(err).__name__}") from err


# --- framing ----------------------------------------------------------------------------------
def send(sock: socket.socket, message, fd: int | None = None) -> None:
    """One frame; `message` is a dataclass or an already-encoded dict."""
    raw = message if isinstance(message, dict) else {"type": type(message).__name__, **plain(message)}
    payload = json.dumps(raw, allow_nan=True).encode()
    data = _LENGTH.pack(len(payload)) + payload
    sock.settimeout(None)
    try:
        if fd is None:
            sock.sendall(data)
            return
        sent = socket.send_fds(sock, [data], [fd])
        if sent < len(data):
            sock.sendall(data[sent:])
    except (BrokenPipeError, ConnectionResetError) as err:
        raise PeerClosed("the peer closed the connection") from err


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        _set_timeout(sock, deadline)
        try:
            chunk, fds = recv_some(sock, min(n - got, 1 << 20))
        except TimeoutError as err:
            raise PeerTimeout("no answer in time") from err
        dispose(fds)  # only a frame's first byte may carry one
        if not chunk:
            raise PeerClosed("the peer closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _set_timeout(sock: socket.socket, deadline: float | None) -> None:
    if deadline is None:
        sock.settimeout(None)
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise PeerTimeout("no answer in time")
    sock.settimeout(left)


def recv_raw(sock: socket.socket, timeout_s: float | None = None) -> tuple[dict, int | None]:
    """(the frame's JSON object, the fd attached to its first byte or None). Any other fd that
    came is closed apart (`dispose`)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    _set_timeout(sock, deadline)
    try:
        head, fds = recv_some(sock, _LENGTH.size)
    except TimeoutError as err:
        raise PeerTimeout("no answer in time") from err
    fd = fds[0] if fds else None
    dispose(fds[1:])
    if not head:
        raise PeerClosed("the peer closed the connection")
    try:
        head += _recv_exact(sock, _LENGTH.size - len(head), deadline)
        (length,) = _LENGTH.unpack(head)
        if length > MAX_FRAME_BYTES:
            raise ProtocolError(f"a frame of {length} bytes (limit {MAX_FRAME_BYTES})")
        payload = _recv_exact(sock, length, deadline)
        try:
            raw = json.loads(payload)
        except (ValueError, RecursionError, MemoryError, OverflowError) as err:  # bombs too
            raise ProtocolError(f"a frame that is not JSON ({err})") from err
    except BaseException:
        dispose([fd] if fd is not None else [])
        raise
    return raw, fd


def recv(sock: socket.socket, expected: tuple[type, ...], timeout_s: float | None = None,
         keep_fd: tuple[type, ...] = ()):
    """(message of one of the `expected` types, attached fd or None). An fd comes back only with
    a message of a `keep_fd` type; any other is closed here, so an fd the peer attaches where none
    belongs (a candidate's memfd on a compile worker's Reply: red team round 16, its pages held
    by the parent for the rest of the run) cannot outlive the frame."""
    raw, fd = recv_raw(sock, timeout_s)
    try:
        message = decode(raw, expected)
    except ProtocolError:
        dispose([fd] if fd is not None else [])
        raise
    if fd is not None and not isinstance(message, keep_fd):
        dispose([fd])
        fd = None
    return message, fd
