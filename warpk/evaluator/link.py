"""The trusted worker's link to one untrusted worker: messages both ways, with a limit on every
wait, and the tensors that travel between them (warpk.evaluator.transport).

`Link` holds what the protocol knows of the task's sizes so far (bytes and tensor counts of one
call's inputs and outputs, the reference's time per call), which bound what an answer may hold
and how long the candidate may take. Whatever the untrusted worker sends is checked here against
those bounds before anything of it is allocated or believed; its failures come back as a Verdict
whose reason can never pass for the harness's own.

Non-goals: no verdicts on outputs (warpk.evaluator.checks), no protocol order (session.Session).
"""

from __future__ import annotations

import os
import secrets
import select
import socket
import time

from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict, flatten, same_inputs
from warpk.evaluator.devices import Device
from warpk.evaluator.fds import settle
from warpk.evaluator.freeze import NoFreeze
from warpk.evaluator.profile import Stopwatch
from warpk.evaluator.remote import read_into, take_fd
from warpk.evaluator.transport import ALIGN, Carrier, layout, memfd_digest, read_back, tensor_bytes


def _env_bytes(name: str, default: int, who: str) -> int:
    value = os.environ.get(name, str(default))
    if not value.isdigit():
        raise ValueError(f"{name}={value!r}: a number of bytes ({who} only; unset it)")
    return int(value)


# A call whose inputs + outputs exceed this is "big": no determinism re-run or returned inputs in
# correctness, and the candidate runs first, then the reference on the same inputs drawn again,
# so peak device memory stays about KernelBench's (inputs + 2 x outputs; docs/evaluator.md §3).
# WARPK_TEST_BIG_IO_BYTES (tests only, passed to the trusted worker by lane.py) lowers it, so the
# huge-task path runs on small shapes in seconds.
BIG_IO_BYTES = _env_bytes("WARPK_TEST_BIG_IO_BYTES", 1 << 30, "tests")
# On a GPU, a batch that moves this much (inputs or outputs) travels in device memory. Host
# memory carried the 128-256 MiB batches at a bias: copies of 15 L2 GEMM references at 0.55-0.80
# on the H100 (2026-12-05), where the batches of 256 MiB or more (device memory) had a median of
# 1.000 and those under 128 MiB (memfds) 0.998 (docs/benchmarks.md, "which path a batch took").
# WARPK_DEVICE_MEMORY_BYTES (benchmarks/screen_copy_bias.py only) sets it for a screen.
DEVICE_MEMORY_BYTES = _env_bytes("WARPK_DEVICE_MEMORY_BYTES", 128 << 20, "screens")
# A diagnostic (scripts/device_acceptance.sh, GO_PAUSE_MS): a huge task's Go waits this long
# after its Stage, the GPU idle, so what the driver does after the other side freed its memory
# cannot overlap the clock (the reference worker ~10% faster than the candidate, H100 2026-12-07).
GO_PAUSE_S = _env_bytes("WARPK_DEBUG_GO_PAUSE_MS", 0, "diagnostics") / 1e3
HARNESS_PREFIXES = ("evaluation failed", "the candidate's worker", "in ", "batch ", "an energy batch")
CANDIDATE_FAILURES = ("compile_error", "runtime_error", "crashed", "incorrect", "static_reject")


def one_line(err: BaseException) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text[:400]


def candidate_text(text: str | None) -> str:
    """A reason written by the candidate's process, bounded, and never passing for ours."""
    text = " ".join((text or "no reason given").split())[:600]
    return f"(from the candidate) {text}" if text.startswith(HARNESS_PREFIXES) else text


class Link:
    """The untrusted worker behind `sock`, as the trusted worker talks to it."""

    def __init__(self, torch, dev: Device, settings, sock: socket.socket, still=None, pid: int | None = None,
                 pidfd: int | None = None):
        self.torch, self.dev, self.s, self.sock = torch, dev, settings, sock
        # frozen from its answer to our next message (warpk.evaluator.freeze); its host pid for
        # reading its outputs out of its memory on the CPU, and a pidfd (the caller's to close)
        # for taking the fd its outputs are in elsewhere (warpk.evaluator.remote)
        self.still = still if still is not None else NoFreeze()
        self.pid, self.pidfd = pid, pidfd
        self.carriers = {on: Carrier(torch, dev.device, on) for on in {False, dev.cuda}}
        self.carrier = self.carriers[False]  # the last Stage's (the next outputs come the same way)
        self.phase = "load"
        self.spans: list[tuple[float, float]] = []  # host-monotonic (start, end) of the candidate's Go's
        self.ref_call_s = None  # the reference's time per call, once known
        self.out_bytes = 0  # bytes of the reference's outputs of one call, once known
        self.in_bytes = 0  # bytes of one staged call's inputs
        self.out_count = self.in_count = 1  # tensors in one call's outputs / inputs, once known
        self.went = False  # whether the candidate has run any call yet
        self.arrived = 0.0  # when the last answer of the untrusted worker was received
        self.go_watch = Stopwatch("go")  # WARPK_PROFILE only: each Go's round trip by phase and step

    def ask(self, message, fd: int | None = None, limit_s: float | None = None, expect=(wire.Reply,)):
        self.still.thaw()
        wire.send(self.sock, message, fd)
        return self.answer(limit_s, expect)

    def send(self, message, fd: int | None = None) -> None:
        """A message the worker runs as it is (energy batches), once nothing arrived unasked."""
        self.check_quiet()
        wire.send(self.sock, message, fd)

    def answer(self, limit_s: float | None = None, expect=(wire.Reply,)):
        """The untrusted worker's next reply if it is ok (else its failure as a Verdict)."""
        limit_s = limit_s if limit_s is not None else self.s.run_timeout_s
        try:
            raw, sent_fd = wire.recv_raw(self.sock, timeout_s=limit_s)
        except wire.PeerTimeout as err:
            raise Verdict("timeout", f"the {self.phase} phase exceeded its limit of {limit_s:.3g} s") from err
        self.arrived = time.perf_counter()  # the answer is here; checking it is our time, not its
        wire.dispose([sent_fd] if sent_fd is not None else [])  # workers name their outbox fd
        #                                                         (remote.take_fd), never send one
        reply = wire.decode(raw, expect)
        if reply.status != "ok":
            status = reply.status if reply.status in CANDIDATE_FAILURES else "runtime_error"
            raise Verdict(status, candidate_text(reply.error))
        # taken now, before our next message, after which the worker closes it
        number = getattr(reply, "outbox_fd", None)
        out_fd = take_fd(self.pidfd, number) if number is not None else None
        return reply, out_fd

    def limit_for(self, calls: int) -> float:
        """The wait allowed for `calls` candidate calls: floor + factor x the reference's time."""
        ref_s = (self.ref_call_s or 0.0) * calls
        return self.s.run_timeout_s + self.s.run_timeout_factor * ref_s

    # --- moving tensors ---------------------------------------------------------------------------
    def carrier_for(self, calls: int) -> Carrier:
        """Host memfds, or on a GPU device memory once a batch moves DEVICE_MEMORY_BYTES or more
        either way (below that the memfd's smaller fixed cost wins)."""
        moved = max(self.in_bytes, self.out_bytes) * calls
        return self.carriers[self.dev.cuda and moved >= DEVICE_MEMORY_BYTES]

    def encode(self, calls: list[list]) -> tuple[int | None, list]:
        """The calls' inputs packed for the untrusted worker (our own copies may go after this)."""
        tensors = [[x for x in c if isinstance(x, self.torch.Tensor)] for c in calls]
        self.in_bytes = max(layout(t)[1] for t in tensors)
        self.in_count = max(1, max(len(t) for t in tensors))
        self.carrier = self.carrier_for(len(calls))
        return self.carrier.encode_calls(calls, shared=self.remote)

    def prepare(self, calls: int) -> None:
        """Stage: the worker finishes what the last Go left and allocates the next outputs'
        buffer, untimed (it answers only once that is done)."""
        self.ask(wire.Stage(self.out_bytes * calls, self.carrier.on_device))
        if self.carrier.on_device and self.out_bytes:
            self.warm(self.out_bytes * calls + (2 << 20) * (self.out_count * calls + 1))

    def warm(self, nbytes: int) -> None:
        """Room in torch's cache for the copies `outputs_of` makes of the outputs inside the clock
        (torch rounds a large block up to 2 MiB), so they do not come from the driver there: huge
        tasks give the memory back before each batch (`release`). The worker's side of this is
        `untrusted.Harness.warm_allocator`."""
        torch, device = self.torch, self.dev.device
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        if nbytes > cached + torch.cuda.mem_get_info(device)[0]:
            return  # no room ahead (a candidate may hold the rest): the copies allocate as they go
        try:
            block = torch.empty(nbytes, dtype=torch.uint8, device=device)
            del block  # back to torch's cache, not to the driver
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()  # no room ahead: the copies allocate as they go

    def go(self, calls: list[list], limit_s: float, consume: bool = False,
           **flags) -> tuple[wire.Ran, list[list], list[list], float]:
        """One round trip of `calls`, after a Stage: (Ran, its outputs, its reported inputs, wall
        ms on this process's clock from sending the Go that carries the inputs to holding copies
        of the outputs here). Device memory the worker could still write is never believed.
        `consume`: empty the caller's `calls` once packed (huge tasks: one copy of the inputs); on
        the CPU the memfd's hash, taken before the worker has it, then stands for them."""
        fd, encoded = self.encode(calls)
        digest = memfd_digest(fd) if consume and self.remote and fd is not None else None
        if consume:
            calls.clear()
            self.release()  # our copy's device memory back to the driver: the workers need it
        try:
            self.prepare(len(encoded))
            if consume and GO_PAUSE_S:
                time.sleep(GO_PAUSE_S)
            ran, outs, ins, wall_ms = self.go_encoded(fd, encoded, limit_s, **flags)
            # it worked on our memfd in place and is frozen now: the memfd is as it left it
            if calls and self.remote:
                self.check_inputs(fd, encoded, calls)
            elif digest is not None and memfd_digest(fd) != digest:
                raise Verdict("incorrect", "the candidate modified its inputs in place")
            return ran, outs, ins, wall_ms
        finally:
            if fd is not None:
                os.close(fd)

    @property
    def remote(self) -> bool:
        """On the CPU the worker copies nothing: inputs in place, outputs read out of it here."""
        return not self.dev.cuda and self.pid is not None

    def check_inputs(self, fd: int | None, encoded: list, calls: list[list]) -> None:
        """The inputs as the worker left them (it is frozen) must be the ones it was given."""
        if fd is None:
            return
        specs = [a.tensor for call in encoded for a in call if a.tensor is not None]
        now = iter(read_back(self.torch, fd, specs))
        for call in calls:
            given = [x for x in call if isinstance(x, self.torch.Tensor)]
            if not same_inputs(self.torch, [next(now) for _ in given], given):
                raise Verdict("incorrect", "the candidate modified its inputs in place")

    def go_encoded(self, fd: int | None, encoded: list, limit_s: float,
                   **flags) -> tuple[wire.Ran, list[list], list[list], float]:
        """`go` with the inputs already encoded (the fd stays the caller's)."""
        nonce = secrets.token_hex(8)
        settle()  # what a worker sent is freed before the clock runs, not during it (fds.py)
        self.still.thaw()
        self.check_quiet()
        self.went = True
        start, since = time.perf_counter(), time.monotonic()
        self.go_watch.last = start
        wire.send(self.sock, wire.Go(encoded, nonce, **flags), fd)
        ran, out_fd = self.answer(limit_s, (wire.Ran,))
        self.go_watch.lap(f"{self.phase}: answer")
        try:  # the fd is ours to close until outputs_of takes it (a failed freeze: red team round 17)
            self.still.freeze()  # nothing of it runs while its outputs are copied and checked
            self.go_watch.lap(f"{self.phase}: freeze")
            self.spans.append((since, time.monotonic()))
            if ran.nonce != nonce:
                raise wire.ProtocolError("an answer that does not echo its Go's nonce")
            if len(ran.outputs) != len(encoded) and not flags.get("repeat"):
                raise Verdict("incorrect", f"{len(encoded)} calls were run but {len(ran.outputs)} "
                              "outputs came back")
        except BaseException:
            if out_fd is not None:
                os.close(out_fd)
            raise
        outs, ins = self.outputs_of(ran, out_fd)
        settle()  # freeing what it sent with its answer is its time (red team round 42)
        wall_ms = (time.perf_counter() - start) * 1e3
        self.go_watch.lap(f"{self.phase}: read back")
        self.go_watch.count(f"{self.phase}: calls", len(encoded))
        self.carrier.unmap()
        return ran, outs, ins, wall_ms

    def check_quiet(self) -> None:
        """Nothing may arrive unasked: an answer sent before its Go is a protocol violation."""
        ready, _, _ = select.select([self.sock], [], [], 0)
        if ready:
            raise wire.ProtocolError("the worker sent a frame before it was asked (an answer ahead of "
                                     "its Go)")

    def outputs_of(self, ran: wire.Ran, fd: int | None) -> tuple[list[list], list[list]]:
        """Copies here of the candidate's outputs (and reported inputs) from what came with `ran`."""
        specs = [s for call in ran.outputs for s in call] + [s for call in ran.inputs_after for s in call]
        # In all at most 8x the bytes of the reference's outputs (a wider dtype is the verdict's
        # business, an incorrect one) plus the staged inputs, in at most as many tensors as the
        # reference's outputs and the inputs have: a candidate cannot make this process allocate
        # what it likes.
        calls = len(ran.outputs)
        allowed = (8 * max(self.out_bytes, 1) + self.in_bytes) * calls + ALIGN * (len(specs) + 1)
        most = (self.out_count + self.in_count) * calls
        try:
            if len(specs) > most:
                raise wire.ProtocolError(f"{len(specs)} tensors came back for {calls} calls; at most {most}")
            total = sum(tensor_bytes(self.torch, spec) for spec in specs)
            if total > allowed:
                raise wire.ProtocolError(f"{total} bytes of tensors came back; at most {allowed}")
        except wire.ProtocolError:
            if fd is not None:
                os.close(fd)
            raise
        try:
            if self.remote:
                if fd is not None:
                    os.close(fd)
                tensors = iter(self.read_remote(specs))
            else:
                tensors = iter(self.carrier.unpack(fd, specs, allowed))
        except (MemoryError, self.torch.cuda.OutOfMemoryError):
            raise  # this side is short of memory: decided as any out of memory (trusted.measure)
        except (RuntimeError, ValueError, OverflowError, OSError) as err:  # torch or the kernel refusing
            why = f"tensors that cannot be built from their specs ({one_line(err)})"
            raise wire.ProtocolError(why) from err
        outs = [[next(tensors) for _ in call] for call in ran.outputs]
        ins = [[next(tensors) for _ in call] for call in ran.inputs_after]
        return outs, ins

    def read_remote(self, specs: list) -> list:
        """Copies here of the tensors at the addresses `specs` give in the worker's memory."""
        torch, out = self.torch, []
        for spec in specs:
            tensor = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype))
            nbytes = tensor.numel() * tensor.element_size()
            if nbytes:
                read_into(self.pid, spec.offset, nbytes, tensor.data_ptr())
            out.append(tensor)
        return out

    def size_outputs(self, ref_out) -> None:
        """Bytes and tensor count of one reference call's outputs: what an answer may hold."""
        flat = [o for o in flatten(ref_out) if isinstance(o, self.torch.Tensor)]
        self.out_bytes, self.out_count = layout(flat)[1], len(flat)

    def settle(self) -> None:
        """Wait until the worker has done what it does after answering (unmapping, giving
        device memory back), so none of it overlaps what runs next: an empty Stage, which it
        answers only after that."""
        self.ask(wire.Stage(0, False))

    def release(self) -> None:
        """Give freed device memory back to the driver (the other process may need it)."""
        if self.dev.cuda:
            self.torch.cuda.empty_cache()
