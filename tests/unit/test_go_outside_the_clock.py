"""What a worker does for a Go outside the clock, on both sides. Device memory for a Go is
reserved in torch's cache while staging (untimed): a huge task gives its memory back after each
batch, and getting gigabytes from the driver again inside the clock made the reference's batches
5-12x its forward on the H100 (docs/benchmarks.md, 2026-12-06); and no garbage collection runs
inside a Go. torch's CUDA calls are a fake here that records what was asked of it."""

from __future__ import annotations

import socket
import types

import pytest

from warpk.evaluator import protocol as wire
from warpk.evaluator.link import Link
from warpk.evaluator.untrusted import Harness

SETTINGS = wire.Settings(5, 10, 20.0, 1 << 30, 1e-4, 1e-2, 1, 600.0, 10.0, 20.0)
GIB = 1 << 30


class OutOfMemory(RuntimeError):
    pass


class FakeCuda:
    """torch.cuda's allocator as far as the reservation uses it: `reserved` bytes held by this
    process (`allocated` of them live, the rest cached), `peak` reserved since a reset, `room`
    what the device can give this process, `free` what it says it can (by default the same)."""

    OutOfMemoryError = OutOfMemory

    def __init__(self, reserved: int, peak: int, room: int = 1 << 50, allocated: int = 0,
                 free: int | None = None):
        self.reserved, self.peak, self.room, self.allocated, self.free = reserved, peak, room, allocated, free
        self.blocks: list[int] = []  # every block asked for and handed out (freed at once)
        self.emptied = 0

    def memory_reserved(self, device=None) -> int:
        return self.reserved

    def memory_allocated(self, device=None) -> int:
        return self.allocated

    def max_memory_reserved(self, device=None) -> int:
        return self.peak

    def mem_get_info(self, device=None) -> tuple[int, int]:
        return (self.room - self.reserved if self.free is None else self.free), self.room

    def reset_peak_memory_stats(self, device=None) -> None:
        self.peak = self.reserved

    def empty_cache(self) -> None:
        self.emptied += 1
        self.reserved = self.allocated

    def allocate(self, nbytes: int) -> object:
        if self.reserved - self.allocated < nbytes:  # not in the cache: from the driver
            if self.reserved + nbytes > self.room:
                raise OutOfMemory("CUDA out of memory")
            self.reserved += nbytes
            self.peak = max(self.peak, self.reserved)
        self.blocks.append(nbytes)  # freed into the cache at once
        return object()


def fake_torch(cuda: FakeCuda):
    return types.SimpleNamespace(cuda=cuda, uint8="uint8",
                                 empty=lambda nbytes, dtype, device: cuda.allocate(nbytes))


class Outbox:
    def close(self) -> None:
        pass


def harness(cuda: FakeCuda) -> Harness:
    made = Harness(None)
    made.torch = fake_torch(cuda)
    made.dev = types.SimpleNamespace(cuda=True, device="cuda:0", sync=lambda: None)
    carrier = types.SimpleNamespace(outbox=lambda nbytes=0: Outbox(), on_device=True)
    made.carriers = {False: carrier, True: carrier}
    return made


def test_a_stage_for_a_go_reserves_what_the_last_go_held_at_its_peak():
    cuda = FakeCuda(reserved=1 * GIB, peak=1 * GIB, allocated=1 * GIB)  # its weights, after a release
    worker = harness(cuda)
    worker.peak_reserved = 9 * GIB  # the last Go's peak: weights, outputs, temporaries
    assert worker.on_stage(wire.Stage(4 * GIB, True)).status == "ok"
    assert cuda.blocks == [8 * GIB]  # one block of the difference, back in the cache
    assert cuda.reserved == 9 * GIB and cuda.peak == 9 * GIB  # the next Go's peak starts here
    assert worker.on_stage(wire.Stage(4 * GIB, True)).status == "ok"
    assert cuda.blocks == [8 * GIB]  # already held: nothing more


def test_an_empty_stage_only_settles_and_keeps_nothing():
    cuda = FakeCuda(reserved=1 * GIB, peak=1 * GIB, allocated=1 * GIB)
    worker = harness(cuda)
    worker.peak_reserved = 9 * GIB
    assert worker.on_stage(wire.Stage(0, False)).status == "ok"
    assert cuda.blocks == []  # the other side runs next: the memory stays given back


@pytest.mark.parametrize("free", [None, 16 * GIB])  # the device says so / it said more
def test_no_room_ahead_is_not_a_failure_the_go_allocates_as_it_goes(free):
    """Not even tried where the device says there is no room (torch's own out-of-memory path can
    raise a plain RuntimeError where NVML fails: a harness error, red team of session 25), and
    an out-of-memory error from a race is swallowed."""
    cuda = FakeCuda(reserved=1 * GIB, peak=1 * GIB, room=4 * GIB, allocated=1 * GIB, free=free)
    worker = harness(cuda)
    worker.peak_reserved = 9 * GIB
    assert worker.on_stage(wire.Stage(4 * GIB, True)).status == "ok"
    assert cuda.blocks == [] and cuda.emptied == (0 if free is None else 1)


@pytest.fixture
def link():
    ours, theirs = socket.socketpair()
    cuda = FakeCuda(reserved=0, peak=0)
    gpu = types.SimpleNamespace(cuda=True, device="cuda:0", sync=lambda: None)
    made = Link(fake_torch(cuda), gpu, SETTINGS, ours)
    made.ask = lambda message, *args, **kwargs: wire.Reply("ok")
    yield made, cuda
    ours.close()
    theirs.close()


def test_the_trusted_side_reserves_room_for_the_copies_of_the_outputs(link):
    made, cuda = link
    made.out_bytes, made.out_count = 3 * GIB, 2
    made.carrier = types.SimpleNamespace(on_device=True)
    made.prepare(2)
    assert cuda.blocks == [6 * GIB + (2 << 20) * 5]  # 2 MiB of rounding a tensor, and one more
    made.carrier = types.SimpleNamespace(on_device=False)  # outputs through host memory
    made.prepare(2)
    assert len(cuda.blocks) == 1
    made.carrier = types.SimpleNamespace(on_device=True)
    made.prepare(2)  # still in the cache
    assert cuda.blocks[1] == cuda.blocks[0] and cuda.reserved == cuda.blocks[0]
    cuda.empty_cache()  # a huge task's release before its batch
    cuda.room = 1 * GIB  # a candidate holds the rest of the device: not even tried
    made.prepare(2)
    assert len(cuda.blocks) == 2 and cuda.emptied == 1


def test_no_garbage_collection_runs_inside_a_go(monkeypatch):
    """The worker's Go (the clocked part) runs with the collector off; it is on again once the
    next message arrives, so what piled up is collected outside the clock."""
    import gc
    import threading

    seen = []
    ours, theirs = socket.socketpair()
    worker = Harness(theirs)
    monkeypatch.setattr(worker, "on_load", lambda msg: wire.Reply("ok"))
    monkeypatch.setattr(worker, "on_stage",
                        lambda msg: seen.append(("stage", gc.isenabled())) or wire.Reply("ok"))

    def on_go(msg, fd):
        seen.append(("go", gc.isenabled()))
        return wire.Ran("ok", None, msg.nonce), None

    monkeypatch.setattr(worker, "on_go", on_go)
    served = threading.Thread(target=worker.serve)
    served.start()
    try:
        wire.send(ours, wire.Load("", "cpu", 1))
        wire.recv(ours, (wire.Reply,))
        for _ in range(2):
            wire.send(ours, wire.Stage(0, False))
            wire.recv(ours, (wire.Reply,))
            wire.send(ours, wire.Go([], "n"))
            wire.recv(ours, (wire.Ran,))
        wire.send(ours, wire.Stage(0, False))
        wire.recv(ours, (wire.Reply,))
        wire.send(ours, wire.Quit())
        served.join(10)
    finally:
        gc.enable()
        ours.close()
        theirs.close()
    assert seen == [("stage", True), ("go", False)] * 2 + [("stage", True)]
