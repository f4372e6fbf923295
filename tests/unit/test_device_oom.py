"""A device short of memory is never the harness's failure once the candidate has run (red team
round 28): a frozen candidate holding the GPU made the trusted side's next CUDA VMM allocation
fail, which stopped the whole run as a harness error. Here the real cudashare, Link, GuardedSide
and trusted.measure run against a driver stub whose cuMemCreate says CUDA_ERROR_OUT_OF_MEMORY."""

from __future__ import annotations

import os
import socket
import types

import pytest
import torch

from warpk.evaluator import cudashare, trusted
from warpk.evaluator import protocol as wire
from warpk.evaluator.checks import Verdict
from warpk.evaluator.profile import Stopwatch
from warpk.evaluator.reference import GuardedSide, out_of_memory, reference_failures
from warpk.evaluator.untrusted import Harness

SETTINGS = wire.Settings(5, 10, 20.0, 1 << 30, 1e-4, 1e-2, 1, 600.0, 10.0, 20.0)


class Driver:
    """libcuda as cudashare calls it: every cuMemCreate fails with `code`."""

    def __init__(self, code: int):
        self.code = code

    def cuGetErrorName(self, code, ref):
        ref._obj.value = {2: b"CUDA_ERROR_OUT_OF_MEMORY", 1: b"CUDA_ERROR_INVALID_VALUE"}[code]
        return 0

    def cuMemGetAllocationGranularity(self, ref, prop, flag):
        ref._obj.value = 2 << 20
        return 0

    def cuMemCreate(self, *args):
        return self.code


class FakeGpu:
    """A GPU lane as Link sees one (its tensors stay on the CPU here)."""

    cuda = True
    device = torch.device("cpu")
    name = "fake-gpu"

    def sync(self) -> None:
        pass


SHORT = "cuMemMap failed: CUDA_ERROR_OUT_OF_MEMORY (2): the device is out of memory"


def _short(*args):
    raise cudashare.DeviceOutOfMemory(SHORT)


def _device_harness() -> Harness:
    """An untrusted worker's state as on a GPU lane, its next transport device memory."""
    from warpk.evaluator.transport import Carrier

    harness = Harness(None)
    harness.torch, harness.dev = torch, FakeGpu()
    harness.carriers = {on: Carrier(torch, torch.device("cpu"), on) for on in (False, True)}
    harness.carrier = harness.carriers[True]
    return harness


def _spec():
    from warpk.evaluator.protocol import TensorSpec

    return TensorSpec(0, "float32", [4])


@pytest.fixture
def driver(monkeypatch):
    def install(code: int) -> None:
        monkeypatch.setattr(cudashare, "_driver", lambda: Driver(code))
        monkeypatch.setattr(cudashare, "granularity", lambda index: 2 << 20)
    return install


@pytest.fixture
def link():
    from warpk.evaluator.link import Link

    ours, theirs = socket.socketpair()
    made = Link(torch, FakeGpu(), SETTINGS, ours)
    made.out_bytes, made.ref_call_s = 160 << 20, 1e-3  # a 160 MiB batch: device memory
    yield made
    ours.close()
    theirs.close()


def test_a_driver_out_of_memory_is_a_memory_error_and_other_failures_are_not(driver):
    driver(2)
    with pytest.raises(MemoryError, match="out of memory"):
        cudashare.allocate(torch, torch.device("cpu"), 1 << 20)
    driver(1)
    with pytest.raises(cudashare.CudaShareError) as err:
        cudashare.allocate(torch, torch.device("cpu"), 1 << 20)
    assert not isinstance(err.value, MemoryError)


def test_the_reference_sides_allocation_failing_is_a_memory_error_not_a_harness_error(driver, link):
    driver(2)
    assert link.carrier_for(1).on_device
    refs = types.SimpleNamespace(discard=lambda: None)
    side = GuardedSide(link, lambda what: reference_failures(refs, True, what))
    with pytest.raises(MemoryError):
        side.go([[torch.ones(4)]], 1.0)


@pytest.mark.parametrize(("went", "status"), [(True, "runtime_error"), (False, "too_big")])
def test_trusted_measure_decides_it_by_whether_the_candidate_ran(driver, link, monkeypatch, went, status):
    driver(2)

    class Session:
        def __init__(self, *args):
            self.phase, self.went, self.freezer, self.pidfd = "timing", went, None, None
            self.spare = types.SimpleNamespace(thaw=lambda: None)
            self.watch, self.go_watch, self.ref_link = Stopwatch("t"), Stopwatch("g"), None
            self.found = types.SimpleNamespace(fields=lambda: {})

        def run(self):
            link.go([[torch.ones(4)]], 1.0)

    monkeypatch.setattr(trusted, "Session", Session)
    request = types.SimpleNamespace(device="cuda", settings=SETTINGS, candidate_pid=None)
    measurement = trusted.measure(torch, {"cuda": FakeGpu()}, request, link.sock)
    assert measurement.status == status, measurement.error
    assert "out of memory" in measurement.error


def test_a_worker_that_cannot_stage_its_outputs_replies_and_lives(driver):
    """The reference worker runs this code too: a failed allocation used to kill it (PeerClosed,
    a harness error); now it is a reply the trusted side can decide on."""
    driver(2)
    reply = _device_harness().on_stage(wire.Stage(160 << 20, True))
    assert reply.status == "runtime_error" and out_of_memory(reply.error), reply.error
    reason = Verdict(reply.status, reply.error).reason
    with pytest.raises(Verdict) as after:  # the reference's failure once the candidate ran
        with reference_failures(types.SimpleNamespace(discard=lambda: None), True, "timing"):
            raise Verdict(reply.status, reason)
    assert after.value.status == "runtime_error" and "after the candidate ran" in after.value.reason


def test_inputs_that_cannot_be_mapped_for_want_of_memory_are_a_reply_a_bad_fd_is_still_fatal(monkeypatch):
    from warpk.evaluator import transport

    fd, calls = transport.encode_calls(torch, [[torch.ones(4)]])
    monkeypatch.setattr(cudashare, "import_fd", _short)
    ran, out_fd = _device_harness().on_go(wire.Go(calls, "n0nce"), os.dup(fd))
    assert (ran.status, ran.nonce, out_fd) == ("runtime_error", "n0nce", None)
    assert out_of_memory(ran.error) and "taking the inputs" in ran.error

    def foreign(*args):
        raise cudashare.CudaShareError("the attached fd is not a CUDA allocation")

    monkeypatch.setattr(cudashare, "import_fd", foreign)
    with pytest.raises(wire.ProtocolError, match="cannot be mapped"):  # the sender's fault: fatal
        _device_harness().on_go(wire.Go(calls, "n0nce"), os.dup(fd))
    os.close(fd)


def test_the_trusted_side_short_of_memory_for_the_outputs_is_not_a_protocol_error(link, monkeypatch):
    """Mapping or cloning the answer's outputs without memory is an out of memory (the
    candidate's runtime_error once it ran), not the candidate's broken protocol (`crashed`)."""
    monkeypatch.setattr(link.carrier, "unpack", _short)
    ran = wire.Ran("ok", None, "n0nce", [[_spec()]], [])
    with pytest.raises(MemoryError):
        link.outputs_of(ran, None)

