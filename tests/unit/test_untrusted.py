"""The untrusted worker's message loop (warpk.evaluator.untrusted.Harness.serve)."""

from __future__ import annotations

import socket
import threading

from warpk.evaluator import protocol as wire
from warpk.evaluator.untrusted import Harness


class Recording(Harness):
    """A harness whose steps only record the order they ran in."""

    def __init__(self, sock, log):
        super().__init__(sock)
        self.log = log

    def on_load(self, msg):
        return wire.Reply("ok")

    def on_stage(self, msg, fd):
        self.log.append("stage")
        return wire.Reply("ok")

    def on_go(self, msg):
        self.log.append("go")
        return wire.Ran("ok", None, [], [], 1.0), None

    def after_send(self, msg):
        self.log.append("clean-up")


def test_a_go_is_cleaned_up_only_when_the_next_message_arrives():
    """Freeing device memory must not overlap the trusted side's copy of the outputs, which
    happens between the answer and the trusted side's next message."""
    ours, theirs = socket.socketpair()
    log: list[str] = []
    worker = threading.Thread(target=Recording(theirs, log).serve)
    worker.start()
    wire.send(ours, wire.Load("", "cpu", 1))
    wire.recv(ours, (wire.Reply,), 10)
    wire.send(ours, wire.Go(release=True))
    wire.recv(ours, (wire.Ran,), 10)
    assert log == ["go"]  # answered; nothing freed yet while we would be copying
    wire.send(ours, wire.Stage([]))
    wire.recv(ours, (wire.Reply,), 10)
    assert log == ["go", "clean-up", "stage"]
    wire.send(ours, wire.Quit())
    worker.join(10)
    assert not worker.is_alive()


def test_the_mapping_allowance_is_linear_between_its_probes_and_zero_uncalibrated(monkeypatch):
    from warpk.evaluator import transport

    monkeypatch.setattr(transport, "_MAPPING_MS", {"cuda:0": (1.0, 8.0)})
    on_gpu = transport.Carrier(None, "cuda:0", on_device=True)
    lo, hi = transport.MAPPING_PROBE_BYTES
    assert on_gpu.mapping_ms(lo) == 1.0 and on_gpu.mapping_ms(hi) == 8.0
    assert on_gpu.mapping_ms((lo + hi) // 2) == 4.5 and on_gpu.mapping_ms(0) == 0.0  # never negative
    assert transport.Carrier(None, "cuda:1", on_device=True).mapping_ms(hi) == 0.0  # not calibrated
    assert transport.Carrier(None, "cuda:0", on_device=False).mapping_ms(hi) == 0.0  # memfds


def test_the_wall_bound_allows_the_references_delivery_and_the_mapping_and_nothing_else():
    from warpk.evaluator.timing_phase import wall_bound_ms

    # 100 ms seen; the reference needed 2 ms beyond its compute; 3 ms + 5% slack
    assert wall_bound_ms(100.0, 10.0, 12.0, 0.0) == 100.0 - 3.0 - 3.0 - 5.0
    assert wall_bound_ms(100.0, 10.0, 12.0, 2.0) == wall_bound_ms(100.0, 10.0, 12.0, 0.0) - 3.0
    assert wall_bound_ms(100.0, 12.0, 10.0, 0.0) == 100.0 - 3.0 - 5.0  # a negative delivery allows nothing
