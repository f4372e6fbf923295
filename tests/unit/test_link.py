"""The trusted worker's link to a worker (warpk.evaluator.link), against a fake worker thread:
an answer must echo its Go's nonce and never come unasked, on the CPU outputs are read out of the
worker's memory by the trusted side, and inputs the worker changed in place are caught."""

from __future__ import annotations

import os
import socket
import threading

import pytest
import torch

from warpk.evaluator import protocol as wire
from warpk.evaluator import transport
from warpk.evaluator.checks import Verdict
from warpk.evaluator.devices import Device
from warpk.evaluator.fds import settle
from warpk.evaluator.link import Link
from warpk.evaluator.protocol import TensorSpec
from warpk.evaluator.remote import read_into


class Settings:
    run_timeout_s = 10.0
    run_timeout_factor = 20.0


def fake_worker(sock, on_go):
    """Answers Stage with ok and Go with on_go(msg, inputs) -> Ran, in this process."""
    while True:
        try:
            msg, fd = wire.recv(sock, (wire.Stage, wire.Go, wire.Quit), keep_fd=(wire.Go,))
        except wire.ProtocolError:
            return
        if isinstance(msg, wire.Quit):
            return
        if isinstance(msg, wire.Stage):
            wire.send(sock, wire.Reply("ok"))
            continue
        inputs = transport.decode_calls(torch, fd, msg.calls, "cpu")  # views of the shared memfd
        wire.send(sock, on_go(msg, inputs))


def link_to(on_go):
    ours, theirs = socket.socketpair()
    thread = threading.Thread(target=fake_worker, args=(theirs, on_go), daemon=True)
    thread.start()
    link = Link(torch, Device(torch, "cpu"), Settings(), ours, pid=os.getpid())
    link.out_bytes, link.out_count = 4 * 8, 1
    return link


KEEP = []  # outputs stay alive until the trusted side has read them


def doubled(msg, inputs):
    outs = [call[0] * 2 for call in inputs]
    KEEP[:] = outs
    specs = [[TensorSpec(o.data_ptr(), "float32", list(o.shape))] for o in outs]
    return wire.Ran("ok", None, msg.nonce, specs, [])


def test_outputs_are_read_out_of_the_workers_memory_and_the_time_is_ours():
    link = link_to(doubled)
    calls = [[torch.arange(8, dtype=torch.float32) + i] for i in range(3)]
    ran, outs, _, wall_ms = link.go([list(c) for c in calls], 10.0)
    assert all(torch.equal(o[0], c[0] * 2) for o, c in zip(outs, calls, strict=True))
    assert wall_ms > 0 and not hasattr(ran, "compute_ms")


def test_a_huge_go_pauses_after_its_stage_only_when_asked(monkeypatch):
    # a diagnostic of the huge copies' two speeds (scripts/device_acceptance.sh GO_PAUSE_MS)
    from warpk.evaluator import link as link_module

    slept = []
    monkeypatch.setattr(link_module.time, "sleep", slept.append)
    link = link_to(doubled)
    link.go([[torch.arange(8, dtype=torch.float32)]], 10.0, consume=True)
    monkeypatch.setattr(link_module, "GO_PAUSE_S", 0.05)
    link.go([[torch.arange(8, dtype=torch.float32)]], 10.0)  # not huge: no pause
    assert slept == []
    link.go([[torch.arange(8, dtype=torch.float32)]], 10.0, consume=True)
    assert slept == [0.05]


def test_an_answer_that_does_not_echo_the_nonce_is_a_protocol_error():
    link = link_to(lambda msg, inputs: wire.Ran("ok", None, "guessed", [], []))
    with pytest.raises(wire.ProtocolError, match="nonce"):
        link.go([[torch.zeros(8)]], 10.0)


def test_a_frame_sent_before_it_was_asked_for_is_a_protocol_error():
    ours, theirs = socket.socketpair()
    wire.send(theirs, wire.Ran("ok", None, "", [], []))  # written ahead of any Go
    link = Link(torch, Device(torch, "cpu"), Settings(), ours, pid=os.getpid())
    with pytest.raises(wire.ProtocolError, match="before it was asked"):
        link.go_encoded(None, [[]], 10.0)


def test_inputs_changed_in_place_are_caught_by_the_trusted_side():
    def in_place(msg, inputs):
        outs = [call[0].mul_(2) for call in inputs]  # writes into the shared inputs
        KEEP[:] = outs
        specs = [[TensorSpec(o.data_ptr(), "float32", list(o.shape))] for o in outs]
        return wire.Ran("ok", None, msg.nonce, specs, [])

    link = link_to(in_place)
    with pytest.raises(Verdict, match="modified its inputs in place"):
        link.go([[torch.arange(8, dtype=torch.float32)]], 10.0)


def test_reading_an_address_the_worker_does_not_hold_is_a_protocol_error():
    out = torch.empty(4)
    with pytest.raises(wire.ProtocolError, match="never touched"):
        read_into(os.getpid(), 8, 16, out.data_ptr())  # page 0 is never mapped: no entry


def test_an_fd_sent_with_an_answer_is_closed_when_the_worker_cannot_be_frozen():
    """Red team round 17: a worker that makes the freeze fail (a child stuck in D state under
    the SIGSTOP freezer) sent its Ran with a memfd; the trusted worker, reused for the next
    candidates, kept it for the rest of the run, its pages charged to the sandboxes' budget."""
    from warpk.evaluator.freeze import FreezeError

    class Unfreezable:
        def freeze(self):
            raise FreezeError("a thread that never stops")

        def thaw(self):
            pass

    ours, theirs = socket.socketpair()

    def worker():
        msg, fd = wire.recv(theirs, (wire.Stage,))
        wire.send(theirs, wire.Reply("ok"))
        msg, fd = wire.recv(theirs, (wire.Go,), keep_fd=(wire.Go,))
        gift = os.memfd_create("warpk-link-gift")
        os.ftruncate(gift, 1 << 20)
        wire.send(theirs, wire.Ran("ok", None, msg.nonce, [[]], []), gift)
        os.close(gift)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    link = Link(torch, Device(torch, "cpu"), Settings(), ours, still=Unfreezable(), pid=os.getpid())
    link.out_bytes, link.out_count = 4 * 8, 1
    with pytest.raises(FreezeError):
        link.go([[torch.zeros(8)]], 10.0)
    thread.join(5)
    assert settle()  # a sent fd is closed on a thread of its own (fds.dispose)
    held = [os.readlink(f"/proc/self/fd/{n}") for n in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{n}")]
    assert not [link for link in held if "warpk-link-gift" in link]


class FakeCudaDevice:
    """A GPU as the Link sees one (nothing here touches CUDA: Carrier only stores its device)."""

    cuda = True
    device = torch.device("cuda:0")


@pytest.mark.parametrize(("in_mib", "out_mib", "calls", "on_device"), [
    (32, 32, 7, True),    # 224 MiB: the L2 GEMM family, memfds until session 23
    (32, 4e-3, 4, True),  # 128 MiB of inputs alone
    (16, 16, 7, False),   # 112 MiB stays in host memfds
    (0, 300, 1, True),    # the outputs alone decide as well
])
def test_batches_of_128_mib_or_more_travel_in_device_memory(in_mib, out_mib, calls, on_device):
    sock, other = socket.socketpair()
    try:
        link = Link(torch, FakeCudaDevice(), Settings(), sock)
        link.in_bytes, link.out_bytes = int(in_mib * 2**20), int(out_mib * 2**20)
        assert link.carrier_for(calls).on_device is on_device
        cpu = Link(torch, Device(torch, "cpu"), Settings(), sock)
        cpu.in_bytes, cpu.out_bytes = link.in_bytes, link.out_bytes
        assert cpu.carrier_for(calls).on_device is False  # never on the CPU
    finally:
        sock.close()
        other.close()
