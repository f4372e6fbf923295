"""Workers never pass fds (red team round 37, corpus 60): a Ran names its outbox fd and the
trusted side takes a copy with pidfd_getfd; an fd a worker sends anyway is closed unread; and the
trusted side's own fd passing runs with an open-file limit above what a candidate can put in
flight (Linux refuses a sender without CAP_SYS_RESOURCE once its user's fds in flight exceed the
sender's RLIMIT_NOFILE)."""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
import torch

from warpk.evaluator import protocol as wire
from warpk.evaluator import remote, transport
from warpk.evaluator.devices import Device
from warpk.evaluator.link import Link
from warpk.evaluator.resources import FILES_PER_PROCESS


class Settings:
    run_timeout_s = 10.0
    run_timeout_factor = 20.0


def sealed(values: torch.Tensor) -> tuple[int, list]:
    fd, specs = transport.Outbox().seal_with(torch, [values])
    return fd, specs


def worker(sock, answer):
    """A worker thread in this process: Stage -> ok, Go -> answer(msg, inputs) -> (Ran, fd to
    keep open until the next message, fd to send along or None)."""
    held = []
    while True:
        try:
            msg, fd = wire.recv(sock, (wire.Stage, wire.Go, wire.Quit), keep_fd=(wire.Go,))
        except (wire.ProtocolError, OSError):
            return
        for old in held:
            os.close(old)
        held.clear()
        if isinstance(msg, wire.Quit):
            return
        if isinstance(msg, wire.Stage):
            wire.send(sock, wire.Reply("ok"))
            continue
        inputs = transport.decode_calls(torch, fd, msg.calls, "cpu")
        ran, keep, attach = answer(msg, inputs)
        held += [f for f in (keep,) if f is not None]
        wire.send(sock, ran, attach)
        if attach is not None:
            os.close(attach)


@pytest.fixture
def pidfd():
    fd = os.pidfd_open(os.getpid())
    yield fd
    os.close(fd)


def link_to(answer, pidfd):
    ours, theirs = socket.socketpair()
    threading.Thread(target=worker, args=(theirs, answer), daemon=True).start()
    link = Link(torch, Device(torch, "cpu"), Settings(), ours, pid=None, pidfd=pidfd)  # the memfd path
    link.out_bytes, link.out_count = 4 * 8, 1
    return link


def test_outputs_are_taken_by_the_fd_number_the_worker_names_and_an_fd_it_sends_is_not_used(pidfd):
    def answer(msg, inputs):
        fd, specs = sealed(inputs[0][0] * 2)
        decoy, _ = sealed(torch.full((8,), 7.0))  # what a sent fd would say: never read
        return wire.Ran("ok", None, msg.nonce, [specs], [], outbox_fd=fd), fd, decoy

    link = link_to(answer, pidfd)
    x = torch.arange(8, dtype=torch.float32)
    before = set(os.listdir("/proc/self/fd"))
    _, outs, _, _ = link.go([[x.clone()]], 10.0)
    assert torch.equal(outs[0][0], x * 2)
    link.ask(wire.Stage(0, False))  # the worker closes what it kept
    time.sleep(0.05)
    assert len(set(os.listdir("/proc/self/fd")) - before) == 0  # nothing taken or sent stays open


def test_a_named_fd_that_is_no_sealed_memfd_or_none_at_all_is_a_protocol_error(pidfd):
    read_end, write_end = os.pipe()

    def answer_pipe(msg, inputs):
        specs, _ = transport.layout([inputs[0][0]])
        return wire.Ran("ok", None, msg.nonce, [specs], [], outbox_fd=read_end), None, None

    with pytest.raises(wire.ProtocolError, match="memfd"):
        link_to(answer_pipe, pidfd).go([[torch.zeros(8)]], 10.0)
    os.close(read_end), os.close(write_end)

    def answer_missing(msg, inputs):
        specs, _ = transport.layout([inputs[0][0]])
        return wire.Ran("ok", None, msg.nonce, [specs], [], outbox_fd=999_999), None, None

    with pytest.raises(wire.ProtocolError, match="fd 999999"):
        link_to(answer_missing, pidfd).go([[torch.zeros(8)]], 10.0)
    with pytest.raises(wire.ProtocolError, match="not known"):
        remote.take_fd(None, 3)
    with pytest.raises(wire.ProtocolError, match="named fd"):
        remote.take_fd(pidfd, -1)


@pytest.mark.parametrize("exempt", [False, True])
def test_the_trusted_side_runs_with_its_hard_open_file_limit_unless_it_is_exempt(exempt):
    code = ("import resource; from warpk.evaluator import remote; "
            f"remote.exempt_from_fd_limits = lambda: {exempt}; "
            "print(remote.raise_open_files(), resource.getrlimit(resource.RLIMIT_NOFILE)[1])")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    low = min(256, hard)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))).stdout
    soft_after, hard_after = map(int, out.split())
    assert hard_after == hard
    if exempt:  # root: the kernel never refuses its sends, and fd numbers stay under select()'s 1024
        assert soft_after == low
    else:
        assert soft_after == (hard if hard != resource.RLIM_INFINITY else 1 << 20)


def test_the_checks_wait_for_the_worker_to_let_the_trusted_side_in(monkeypatch):
    """The worker grants access as its first step after its imports, a fraction of a second after
    its pid is found: a refusal meanwhile is waited out; one that lasts stops the run in a line."""
    from warpk.evaluator.errors import HarnessError

    refusals = iter([PermissionError(1, "Operation not permitted")] * 3)

    def attempt():
        err = next(refusals, None)
        if err is not None:
            raise err

    remote._until_allowed(attempt, "take the worker's output fds", lambda: False)
    assert next(refusals, None) is None
    monkeypatch.setattr(remote, "PTRACER_WAIT_S", 0.05)
    own = os.pidfd_open(os.getpid())
    try:
        with pytest.raises(HarnessError, match="cannot take the worker's output fds .*ptrace_scope"):
            remote._until_allowed(lambda: remote.take_fd(own, 999_999), "take the worker's output fds",
                                  lambda: False)
    finally:
        os.close(own)


def test_a_worker_gone_before_its_check_is_no_harness_failure(monkeypatch):
    """An idle harness that is gone (killed with others at the memory budget for all sandboxes)
    or a zombie before the checks: they end without a verdict, so its Load fails and the lane
    decides; the run goes on (it stopped as the harness's own failure, 2026-12-07)."""
    monkeypatch.setattr(remote, "PTRACER_WAIT_S", 30.0)  # a wait for a dead process would show
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    pidfd = os.pidfd_open(child.pid)
    try:
        while not remote._exited(child.pid):  # a zombie until reaped: its maps read empty
            time.sleep(0.01)
        start = time.monotonic()
        remote.check_readable(child.pid)
        remote.check_takeable(pidfd)
        child.wait()
        remote.check_readable(child.pid)  # reaped: no /proc entry at all
        assert time.monotonic() - start < 5
    finally:
        os.close(pidfd)
    assert not remote._exited(os.getpid())


def test_a_hard_limit_too_low_to_be_sure_is_said_in_one_line(monkeypatch):
    monkeypatch.setattr(remote, "exempt_from_fd_limits", lambda: False)
    line = remote.fd_passing_line(1024)
    assert line is not None and "\n" not in line and "ulimit -Hn" in line
    assert remote.fd_passing_line(remote.SENDER_FILES_MIN) is None
    monkeypatch.setattr(remote, "exempt_from_fd_limits", lambda: True)
    assert remote.fd_passing_line(1024) is None


HOARD = r"""
import os, socket, threading, time
socks = [socket.socketpair() for _ in range(16)]
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(253)]
def park(pair):
    while True:
        try:
            socket.send_fds(pair[0], [b"x"], fds)
        except OSError:
            return
threads = [threading.Thread(target=park, args=(p,)) for p in socks]
[t.start() for t in threads]; [t.join() for t in threads]
print("parked", flush=True)
time.sleep(30)
"""
SEND = r"""
import os, socket
a, b = socket.socketpair()
try:
    socket.send_fds(a, [b"x"], [os.memfd_create("outbox")]); print("sent")
except OSError as err:
    print("refused", err.errno)
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_candidate_cannot_put_enough_fds_in_flight_to_refuse_the_trusted_sides_sends():
    """In real sandboxes (no capabilities, as a non-root trusted side has none): 16 threads of a
    candidate park fds until the kernel refuses them; then a sender with the candidate's limit is
    refused and one with the limit the trusted side requires (SENDER_FILES_MIN) is not."""
    from warpk.evaluator.sandbox import SANDBOX_HOME, bwrap_command, worker_env
    from warpk.evaluator.seccomp import seccomp_fd

    def sandboxed(code: str, files: int) -> subprocess.Popen:
        filter_fd = seccomp_fd()
        try:
            return subprocess.Popen(
                bwrap_command(None, None, filter_fd) + [sys.executable, "-c", code],
                env=worker_env(SANDBOX_HOME, 1, {}), stdout=subprocess.PIPE, text=True,
                pass_fds=() if filter_fd is None else (filter_fd,), start_new_session=True,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (files, files)))
        finally:
            if filter_fd is not None:
                os.close(filter_fd)

    hoard = sandboxed(HOARD, FILES_PER_PROCESS)
    try:
        assert hoard.stdout.readline().strip() == "parked"
        outcomes = {files: sandboxed(SEND, files).communicate(timeout=60)[0].strip()
                    for files in (FILES_PER_PROCESS, remote.SENDER_FILES_MIN)}
    finally:
        hoard.kill()
        hoard.wait()
    assert outcomes == {FILES_PER_PROCESS: "refused 109", remote.SENDER_FILES_MIN: "sent"}


def lingering_socket(peers: list) -> int:
    """A TCP socket whose last close blocks until its peer (kept in `peers`) is closed: SO_LINGER
    with unsent data the peer never reads."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    ours = socket.socket()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.connect(server.getsockname())
    peer, _ = server.accept()
    server.close()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ours.setblocking(False)
    try:
        while True:
            ours.send(b"x" * 65536)
    except BlockingIOError:
        pass
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
    peers.append(peer)
    return ours.detach()


def test_fds_sent_with_any_byte_of_an_answer_are_closed_apart_and_never_hold_the_trusted_side(pidfd):
    """Red team round 38: a lingering TCP socket sent with a frame's first or a later byte, whose
    close (ours the last reference) blocked the trusted worker until the candidate died: 38
    minutes at the default backstop. Its fds are now closed on a thread of their own."""
    peers: list = []

    def answer(msg, inputs):
        fd, specs = sealed(inputs[0][0] * 2)
        return wire.Ran("ok", None, msg.nonce, [specs], [], outbox_fd=fd), fd, None

    ours, theirs = socket.socketpair()

    def worker():
        held = None
        while True:
            msg, fd = wire.recv(theirs, (wire.Stage, wire.Go, wire.Quit), keep_fd=(wire.Go,))
            if isinstance(msg, wire.Quit):
                return
            if isinstance(msg, wire.Stage):
                wire.send(theirs, wire.Reply("ok"))
                continue
            ran, held, _ = answer(msg, transport.decode_calls(torch, fd, msg.calls, "cpu"))
            body = json.dumps({"type": "Ran", **wire.plain(ran)}).encode()
            data = wire._LENGTH.pack(len(body)) + body
            for at in (0, 1):  # the first byte with two, the second with one
                fds = [lingering_socket(peers) for _ in range(2 - at)]
                socket.send_fds(theirs, [data[at:at + 1]], fds)
                for f in fds:
                    os.close(f)
            theirs.sendall(data[2:])

    threading.Thread(target=worker, daemon=True).start()
    link = Link(torch, Device(torch, "cpu"), Settings(), ours, pid=None, pidfd=pidfd)
    link.out_bytes, link.out_count = 4 * 8, 1
    x = torch.arange(8, dtype=torch.float32)
    try:
        start = time.monotonic()
        _, outs, _, _ = link.go([[x.clone()]], 10.0)
        took_s = time.monotonic() - start
    finally:
        for peer in peers:
            peer.close()
    assert torch.equal(outs[0][0], x * 2) and took_s < 5.0, took_s
    wire.send(ours, wire.Quit())


def test_a_named_socket_is_refused_and_a_dropped_fd_is_closed_apart(pidfd):
    """A named fd that is no memfd or device handle is refused at once (its copy closed apart),
    and `dispose` closes a lingering socket at once, even both ends of its connection."""
    peers: list = []
    tcp = lingering_socket(peers)

    def answer(msg, inputs):
        specs, _ = transport.layout([inputs[0][0]])
        return wire.Ran("ok", None, msg.nonce, [specs], [], outbox_fd=tcp), None, None

    try:
        with pytest.raises(wire.ProtocolError, match="neither a memfd nor a device"):
            link_to(answer, pidfd).go([[torch.zeros(8)]], 10.0)
        start = time.monotonic()
        # the last references, both ends of the connection: a lingering close of one would wait
        # for the other for ever (round 39)
        wire.dispose([tcp, peers.pop().detach()])
        assert time.monotonic() - start < 1.0
        deadline = time.monotonic() + 5.0
        while any(t.name == "dispose-fds" for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(t.name == "dispose-fds" for t in threading.enumerate())  # closed, not stuck
    finally:
        for peer in peers:
            peer.close()


def test_a_sealed_sparse_memfd_of_a_tebibyte_is_mapped_only_as_far_as_the_specs_need(pidfd):
    """Red team round 38: the whole-file mapping of a 1 TiB sealed memfd failed with ENOMEM, an
    OSError the trusted side declared its own failure (harness_error: the run stopped)."""
    def answer(msg, inputs):
        out = inputs[0][0] * 2
        fd = os.memfd_create("huge", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.pwrite(fd, out.numpy().tobytes(), 0)
        os.ftruncate(fd, 1 << 40)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, transport.SEALS)
        specs, _ = transport.layout([out])
        return wire.Ran("ok", None, msg.nonce, [specs], [], outbox_fd=fd), fd, None

    x = torch.arange(8, dtype=torch.float32)
    _, outs, _, _ = link_to(answer, pidfd).go([[x.clone()]], 10.0)
    assert torch.equal(outs[0][0], x * 2)


def test_the_gpu_run_of_this_change_recomputes():
    """docs/benchmarks.md's figures for `pytest -m gpu` at 01d0ed9 (H100): two logs, 26 of 26."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    data = root / "docs" / "data" / "gpu-tests-h100-2026-12-06-01d0ed9"
    first, last = (data / "pytest-gpu.log").read_text(), (data / "pytest-gpu-last.log").read_text()
    collected, selected = map(int, re.search(r"collected (\d+) items / \d+ deselected / (\d+) selected",
                                             first).groups())
    passed = set(re.findall(r"^(tests/\S+) PASSED", first, re.MULTILINE))
    passed |= set(re.findall(r"^PASSED (tests/\S+)", last, re.MULTILINE))
    seconds = re.search(r"1 passed in ([0-9.]+)s", last).group(1)
    text = (root / "docs" / "benchmarks.md").read_text()
    assert "FAILED" not in first + last and len(passed) == selected == 26 and collected == 1133
    assert "60_fds_in_flight_stop_the_run" in first and "62_sparse_outbox" in first
    assert f"passed on its own in {seconds} s" in text
    assert f"collected {collected:,} tests, {selected}" in text


def test_a_workers_socket_is_closed_apart_whatever_it_left_queued():
    """Red team round 40: what a worker leaves queued after its last frame (fds whose release is
    slow: a tmpfs kept alive, a lingering socket) is freed by our last close of its socket, which
    the trusted worker and the sandbox's kill now hand to a thread of their own."""
    from warpk.evaluator.fds import close_apart

    peers: list = []
    tcp = lingering_socket(peers)
    ours, theirs = socket.socketpair()
    socket.send_fds(theirs, [b"x"], [tcp])  # a byte nobody reads, after the last frame
    os.close(tcp)
    theirs.close()
    try:
        start = time.monotonic()
        close_apart(ours)  # purging the queue would wait for the peer
        assert time.monotonic() - start < 1.0 and ours.fileno() == -1
    finally:
        for peer in peers:
            peer.close()


def test_what_a_worker_sent_is_freed_before_the_next_timed_batch(pidfd, monkeypatch):
    """Red team rounds 41-42: a large memfd sent with an answer was freed on the closing thread
    beside the next batch; the sender's own clock now waits for those closes (`fds.settle`)."""
    from warpk.evaluator import fds

    order = []
    real_close_all = fds._close_all

    def slow_close_all(numbers):
        time.sleep(0.3)
        order.append("freed")
        real_close_all(numbers)

    monkeypatch.setattr(fds, "_close_all", slow_close_all)

    def answer(msg, inputs):
        order.append("answered")
        fd, specs = sealed(inputs[0][0] * 2)
        gift = os.memfd_create("warpk-gift")
        return wire.Ran("ok", None, msg.nonce, [specs], [], outbox_fd=fd), fd, gift

    link = link_to(answer, pidfd)
    _, _, _, wall_ms = link.go([[torch.zeros(8)]], 10.0)
    link.go([[torch.zeros(8)]], 10.0)
    assert order[:3] == ["answered", "freed", "answered"]
    assert wall_ms >= 300  # and on the sender's clock (round 42), not before the other side's
    assert fds.settle()
