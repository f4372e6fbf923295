"""Nothing of the host's /proc is writable from the sandbox (red team round 68): where a sandbox's
uid 0 is the host's (the evaluator root and no drop to nobody: warpk.evaluator.identity), a
sysctl's write needs only that uid: 770 files were open for writing, and kernel.core_pattern set
to a pipe ran a program as host root. The files are opened for writing only, never written."""


import pytest

from tests.unit.test_sandbox import needs_bwrap
from tests.unit.test_seccomp import _sandboxed
from warpk.evaluator import sandbox

# Every file of /proc outside the processes' folders, opened O_WRONLY and closed at once
OPEN_FOR_WRITING = r'''
import os
found = []
def try_open(path):
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY))
        found.append(path)
    except OSError:
        pass
for name in os.listdir("/proc"):
    path = "/proc/" + name
    if name.isdigit() or os.path.islink(path):
        continue
    if os.path.isdir(path):
        for root, _, files in os.walk(path):
            for f in files:
                try_open(os.path.join(root, f))
    else:
        try_open(path)
print("\n".join(found))
'''


def _writable_in_sandbox() -> list[str]:
    return _sandboxed(OPEN_FOR_WRITING, filtered=True).split()


@needs_bwrap
def test_no_file_of_the_hosts_proc_opens_for_writing_in_the_sandbox():
    assert _writable_in_sandbox() == []


@needs_bwrap
def test_no_file_of_the_hosts_proc_opens_for_writing_in_a_root_sandbox(root_sandbox):
    assert _writable_in_sandbox() == []


@needs_bwrap
def test_without_the_read_only_binds_a_root_sandbox_could_write_the_hosts_sysctls(root_sandbox, monkeypatch):
    monkeypatch.setattr(sandbox, "PROC_READ_ONLY", ())
    found = _writable_in_sandbox()
    assert "/proc/sys/kernel/core_pattern" in found and "/proc/pressure/cpu" in found


@needs_bwrap
def test_a_sandbox_dropped_to_nobody_opens_no_sysctl_for_writing_even_without_the_binds(monkeypatch):
    from warpk.evaluator import identity

    if not identity.drops():
        pytest.skip("sandboxes drop to nobody only where the evaluator is root")
    monkeypatch.setattr(sandbox, "PROC_READ_ONLY", ())
    found = _writable_in_sandbox()
    # what is left is open to every user of the host (pressure triggers: the binds' other reason)
    assert not [f for f in found if f.startswith("/proc/sys/") and f != "/proc/sys/kernel/ns_last_pid"]


@needs_bwrap
def test_a_worker_can_queue_few_signals():
    """Queued signals count against the uid's host-wide tally (a root sandbox queued 96k and the
    host's root got EAGAIN from timer_create: red team round 70): a worker's limit is small."""
    from warpk.evaluator.entry import SIGNALS_PENDING
    from warpk.evaluator.sandbox import Limits, UntrustedProcess

    worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, True), {})
    try:
        limits = ""
        for _ in range(100):
            try:
                limits = open(f"/proc/{worker.proc.pid}/limits").read()
                break
            except OSError:
                continue
        line = next(row for row in limits.splitlines() if row.startswith("Max pending signals"))
        assert line.split()[3:5] == [str(SIGNALS_PENDING)] * 2
    finally:
        worker.close()
