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

    def on_stage(self, msg):
        self.log.append("stage")
        return wire.Reply("ok")

    def on_go(self, msg, fd):
        self.log.append("go")
        return wire.Ran("ok", None, msg.nonce, [], []), None

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
    wire.send(ours, wire.Go([], "n0", release=True))
    wire.recv(ours, (wire.Ran,), 10)
    assert log == ["go"]  # answered; nothing freed yet while we would be copying
    wire.send(ours, wire.Stage(0))
    wire.recv(ours, (wire.Reply,), 10)
    assert log == ["go", "clean-up", "stage"]
    wire.send(ours, wire.Quit())
    worker.join(10)
    assert not worker.is_alive()
