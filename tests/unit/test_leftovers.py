"""What a dead sandbox leaves to the kernel (warpk.evaluator.leftovers): a tmpfs kept alive by an
fd in a unix socket's own queue was torn down by the kernel's unix collector into the next
candidate's baseline (red team round 65); the lane now runs the collector and waits for it."""

import os
import shutil
import subprocess
import sys

import pytest

from warpk.evaluator import leftovers
from warpk.evaluator.identity import own_folder
from warpk.evaluator.resources import ResourceGroup, placement
from warpk.evaluator.sandbox import SANDBOX_HOME, bwrap_command, worker_env
from warpk.evaluator.seccomp import seccomp_fd

METHOD, BASES = placement()

CYCLE = r'''
import array, os, socket
os.makedirs("/tmp/f")
for i in range(FILES):
    os.close(os.open(f"/tmp/f/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
d = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
s1, s2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
s1.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [d, s2.fileno()]))])
os.close(d)
s1.close()
print("kept")
'''


def _dead_sandbox(group: ResourceGroup, code: str, build=None) -> None:
    fd = seccomp_fd()
    try:
        done = subprocess.run(bwrap_command(build, None, fd) + [sys.executable, "-c", code],
                              env=worker_env(SANDBOX_HOME, 1, {}), pass_fds=() if fd is None else (fd,),
                              preexec_fn=group.join, capture_output=True, text=True, timeout=120)
    finally:
        if fd is not None:
            os.close(fd)
    assert done.stdout.strip() == "kept", done.stderr[-500:]


@pytest.mark.skipif("memory" not in BASES, reason="no memory cgroup on this machine")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_tmpfs_kept_in_a_dead_sandboxs_socket_is_freed_before_its_group_goes():
    group = ResourceGroup(2 << 30)
    _dead_sandbox(group, CYCLE.replace("FILES", "150_000"))
    # kept after the sandbox died (unless some unix socket closed meanwhile ran the collector):
    # on this VM for seconds, until the next close of any unix socket
    held_before = leftovers.held_bytes(group.dirs["memory"], METHOD == "cgroup2")
    group.close()
    waited_s, held = group.settled
    assert held <= leftovers.KERNEL_FLOOR_BYTES and waited_s < 10, (held_before, held, waited_s)


class FakeGroup:
    """memory.stat and usage of a v1 group whose held bytes follow `held` per look."""

    def __init__(self, tmp_path, held: list[int]):
        self.dir, self.held = tmp_path, list(held)
        (tmp_path / "memory.stat").write_text("cache 0\nshmem 0\n")
        self.look()

    def look(self) -> None:
        now = self.held.pop(0) if len(self.held) > 1 else self.held[0]
        (self.dir / "memory.usage_in_bytes").write_text(str(now))


def _settle(tmp_path, held: list[int]) -> tuple[float, int | None, int]:
    group, now, calls = FakeGroup(tmp_path, held), [0.0], [0]

    def sleep(s):
        now[0] += s
        calls[0] += 1
        group.look()

    waited, left = leftovers.settle(tmp_path, False, clock=lambda: now[0], sleep=sleep)
    return waited, left, calls[0]


def test_settle_waits_while_the_held_memory_falls_and_stops_under_the_floor(tmp_path, monkeypatch):
    monkeypatch.setattr(leftovers, "run_unix_collector", lambda: None)
    mib = 1 << 20
    waited, left, looks = _settle(tmp_path, [300 * mib, 200 * mib, 100 * mib, 4 * mib])
    assert left == 4 * mib and looks == 3


def test_settle_gives_up_on_memory_that_does_not_fall(tmp_path, monkeypatch):
    monkeypatch.setattr(leftovers, "run_unix_collector", lambda: None)
    waited, left, _ = _settle(tmp_path, [300 << 20])
    assert left == 300 << 20 and leftovers.STUCK_S <= waited < leftovers.STUCK_S + 0.1


def test_settle_stops_at_its_cap_however_slowly_it_falls(tmp_path, monkeypatch):
    monkeypatch.setattr(leftovers, "run_unix_collector", lambda: None)
    falling = [(10_000 - 2 * i) << 20 for i in range(5000)]  # 2 MiB a look, for ever
    waited, left, _ = _settle(tmp_path, falling)
    assert leftovers.SETTLE_WAIT_S <= waited < leftovers.SETTLE_WAIT_S + 0.1
    assert left > leftovers.KERNEL_FLOOR_BYTES


DIRTY = r'''
import os
with open("/build/dirty", "wb") as f:
    f.write(b"x" * (96 << 20))
print("kept")
'''


@pytest.mark.skipif("memory" not in BASES, reason="no memory cgroup on this machine")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.parametrize("flush", [True, False])
def test_pages_a_dead_sandbox_dirtied_in_its_build_dir_are_written_back_first(tmp_path, flush):
    # red team round 66: the flusher wrote them back ~30 s later, into a later baseline
    build = tmp_path / "build"
    own_folder(build, "bwrap")  # nobody's where the sandbox drops to nobody (warpk.evaluator.identity)
    group = ResourceGroup(2 << 30)
    _dead_sandbox(group, DIRTY.replace("/build", str(build)), build)
    dirty = leftovers.dirty_bytes(group.dirs["memory"], METHOD == "cgroup2")
    group.close((lambda: leftovers.sync_folder(build)) if flush else None)
    _, held = group.settled
    if dirty <= 64 << 20:
        pytest.skip(f"the kernel wrote the pages back already ({dirty >> 20} MiB dirty at close)")
    if flush:
        assert held <= leftovers.KERNEL_FLOOR_BYTES
    else:  # the control: nothing else writes them back that soon
        assert held > 64 << 20


def test_a_failure_to_run_the_collector_or_sync_is_no_harness_failure(tmp_path, monkeypatch):
    def no_fds(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(leftovers.socket, "socketpair", no_fds)
    leftovers.run_unix_collector()  # nothing raised: the wait still sees what is freed
    leftovers.sync_folder(tmp_path / "gone")
    (tmp_path / "file").write_text("x")
    leftovers.sync_folder(tmp_path / "file")  # not a folder
    leftovers.sync_folder(tmp_path)
