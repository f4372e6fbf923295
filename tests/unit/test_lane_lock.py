"""One measurement at a time per core and GPU on a machine (warpk.evaluator.lane_lock): a lane
waits for another run's lane on the same cores or GPU, as long as that one runs, not for one on
other cores; a stopped holder fails the waiting run in one line; the lane holds it for the whole
measurement, before the backstop starts."""

import fcntl
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from warpk.evaluator import lane, lane_lock
from warpk.evaluator.errors import HarnessFailure
from warpk.evaluator.lane_lock import LaneLock


def _holder(base, cores, gpu=None, stop=False):
    """Another process holding the lane's locks (and stopping itself if `stop`)."""
    code = ("import os, signal, time; from pathlib import Path\n"
            "from warpk.evaluator.lane_lock import LaneLock\n"
            f"with LaneLock({cores!r}, {gpu!r}, base=Path({str(base)!r})).held():\n"
            "    print('held', flush=True)\n"
            f"    {'os.kill(os.getpid(), signal.SIGSTOP)' if stop else 'time.sleep(60)'}\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _end(proc):
    proc.send_signal(signal.SIGCONT)
    proc.kill()
    proc.wait()


def test_a_lane_on_the_same_core_waits_until_the_holder_lets_go(tmp_path):
    holder = _holder(tmp_path, (2, 3))
    got, notes = [], []

    def wait():
        with LaneLock((3,), base=tmp_path, note=notes.append).held():
            got.append(time.monotonic())

    try:
        with LaneLock((0, 1), base=tmp_path).held():  # other cores: no wait
            pass
        waiter = threading.Thread(target=wait)
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not got, "a lane on a held core did not wait"
    finally:
        _end(holder)
    waiter.join(10)
    assert len(got) == 1


def test_the_same_gpu_on_other_cores_waits_and_the_wait_is_noted(tmp_path, monkeypatch):
    monkeypatch.setattr(lane_lock, "NOTE_AFTER_S", 0.1)
    monkeypatch.setattr(lane_lock, "LOOK_S", 0.05)
    holder = _holder(tmp_path, (5,), "GPU-a")
    notes = []
    waiter = threading.Thread(target=lambda: LaneLock((4,), "GPU-a", base=tmp_path, note=notes.append)
                              .held().__enter__())
    waiter.start()
    waiter.join(0.5)
    try:
        assert waiter.is_alive()
        assert notes == [f"evaluate: waiting for another run's measurement on gpu-GPU-a (pid {holder.pid})"]
    finally:
        _end(holder)
    waiter.join(10)
    assert not waiter.is_alive()


def test_a_stopped_holder_fails_the_waiting_run_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(lane_lock, "STOPPED_WAIT_S", 0.3)
    holder = _holder(tmp_path, (7,), stop=True)
    try:
        why = rf"pid {holder.pid}\) holds .*core-0007 .* stopped for 0.3 s"
        with pytest.raises(HarnessFailure, match=why):
            with LaneLock((7,), base=tmp_path).held():
                pass
    finally:
        _end(holder)


def test_a_stopped_pid_written_into_the_lock_files_fails_nothing(tmp_path, monkeypatch):
    """Red team round 32 (process mode, where a candidate can reach the files): a stopped process
    of the candidate's named in every lock file while a live run holds the lock. The waiter asks
    the kernel who holds it, waits for that run, and gets the lane when it lets go."""
    monkeypatch.setattr(lane_lock, "STOPPED_WAIT_S", 0.3)
    holder = _holder(tmp_path, (7,))
    decoy = subprocess.Popen(["sleep", "60"])
    decoy.send_signal(signal.SIGSTOP)
    got = []
    try:
        for path in lane_lock.folder(tmp_path).iterdir():
            path.write_text(str(decoy.pid))
        fd = os.open(lane_lock.folder(tmp_path) / "core-0007", os.O_RDONLY)
        try:
            assert lane_lock.holder_pid(fd) == holder.pid  # the kernel's word, not the file's
        finally:
            os.close(fd)
        waiter = threading.Thread(target=lambda: got.append(LaneLock((7,), base=tmp_path).held().__enter__()))
        waiter.start()
        waiter.join(1.5)  # five times the stopped wait: a waiter that believed the files had failed
        assert waiter.is_alive() and not got
    finally:
        _end(holder)
        _end(decoy)
    waiter.join(10)
    assert got == [None]


def _leave(folder, leave: str) -> None:
    """What a process-mode candidate can leave behind for core 3 (red team round 33)."""
    lock, turn = folder / "core-0003", folder / "core-0003.turn"
    if leave == "turn_hardlink":  # the lock file and its turnstile one inode: a lane waits on itself
        turn.touch()
        os.link(turn, lock)
    elif leave == "directory":
        lock.mkdir()
    elif leave == "symlink":
        lock.symlink_to(folder / "elsewhere")
    elif leave == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(lock))
        s.close()
    elif leave == "fifo":
        os.mkfifo(lock)
    elif leave == "folder_0755":
        folder.chmod(0o755)


@pytest.mark.parametrize("leave", ["turn_hardlink", "directory", "symlink", "socket", "fifo", "folder_0755"])
def test_what_a_process_mode_candidate_leaves_in_the_folder_fails_and_hangs_nothing(tmp_path, leave):
    folder = lane_lock.folder(tmp_path)
    _leave(folder, leave)
    entered = []
    waiter = threading.Thread(target=lambda: entered.append(LaneLock((3,), base=tmp_path).held().__enter__()),
                              daemon=True)  # fmt: skip
    waiter.start()
    waiter.join(5)
    assert entered == [None], f"{leave}: the lane never got its lock"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    lock = folder / "core-0003"
    assert lock.is_file() and not lock.is_symlink() and lock.stat().st_nlink == 1


def test_a_lane_that_comes_straight_back_queues_behind_a_waiting_one(tmp_path):
    """Another run measures 40 candidates back to back (0.05 s each, letting go in between): a
    lane that waits gets its turn while that run is still going, not after it (the turnstile)."""
    code = ("import sys, time; from pathlib import Path; from warpk.evaluator.lane_lock import LaneLock\n"
            f"lock = LaneLock((9,), base=Path({str(tmp_path)!r}))\n"
            "for n in range(40):\n"
            "    with lock.held():\n"
            "        print(n, flush=True) if n == 0 else None; time.sleep(0.05)\n")
    busy = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline().strip() == "0"
        with LaneLock((9,), base=tmp_path).held():
            assert busy.poll() is None, "the waiting lane got its turn only once the other run had ended"
    finally:
        _end(busy)


def test_the_locks_are_taken_in_one_order():
    assert lane_lock.names((10, 2), "GPU-x") == ["core-0002", "core-0010", "gpu-GPU-x"]
    assert lane_lock.names((), None) == []


def test_a_lock_folder_that_cannot_be_made_is_our_failure_in_one_line(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(HarnessFailure, match="cannot make .* for the lanes' machine-wide locks"):
        with LaneLock((0,), base=tmp_path / "file").held():
            pass


@pytest.mark.parametrize("leave", ["symlink", "file", "dangling_symlink"])
def test_what_stands_where_the_lock_folder_should_be_is_moved_aside_and_never_followed(tmp_path, leave):
    """Red team round 34 (process mode): a link, a file or a dangling link at the folder's name made
    every later run fail; it is moved aside (a link's target is left as it was)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("theirs")
    path = tmp_path / f"warpk-timing-{os.getuid()}"
    if leave == "symlink":
        path.symlink_to(elsewhere)
    elif leave == "file":
        path.write_text("x")
    else:
        path.symlink_to(tmp_path / "nowhere")
    with LaneLock((0,), base=tmp_path).held():
        pass
    assert path.is_dir() and not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o700
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep"]
    assert (elsewhere / "keep").read_text() == "theirs"
    assert len(list(tmp_path.glob(f"{path.name}.moved-*"))) == 1


def test_a_repair_waits_for_the_folders_lock_and_moves_aside_only_what_is_still_wrong(tmp_path, monkeypatch):
    """Round 34: two runs repairing at once; the first to take the folder's lock makes the file
    anew, the second looks again and leaves it (it moved aside the file the other had just made)."""
    folder = lane_lock.folder(tmp_path)
    (folder / "core-0003").mkdir()
    real_rename, renamed = os.rename, []

    def rename(src, dst):  # as if another run repaired it between our two looks
        renamed.append(str(src))
        return real_rename(src, dst)

    monkeypatch.setattr(lane_lock.os, "rename", rename)
    holder = os.open(folder, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the other run's repair in progress
    got = []
    waiter = threading.Thread(target=lambda: got.append(lane_lock.open_lock_file(folder / "core-0003")))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not renamed  # waits for the folder's lock, moves nothing yet
    real_rename(folder / "core-0003", folder / "core-0003.other")  # the other run's repair
    (folder / "core-0003").touch(mode=0o600)
    os.close(holder)
    waiter.join(5)
    assert got and not renamed  # the second look found a good file: nothing moved aside
    os.close(got[0])


def test_a_repair_waits_for_the_folders_lock_a_bounded_time(tmp_path, monkeypatch):
    monkeypatch.setattr(lane_lock, "REPAIR_WAIT_S", 0.3)
    folder = lane_lock.folder(tmp_path)
    (folder / "core-0003").mkdir()
    holder = os.open(folder, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        with pytest.raises(HarnessFailure, match="locked for 0.3 s"):
            lane_lock.open_lock_file(folder / "core-0003")
    finally:
        os.close(holder)


def test_the_lane_holds_the_locks_for_the_whole_measurement_before_its_backstop(monkeypatch):
    """Lane.measure starts its workers ahead (test_lane_start.py), then takes the machine lock, then
    measures (the backstop is _wait's, inside)."""
    events = []

    class Lock:
        def held(self):
            class Held:
                def __enter__(self):
                    events.append("locked")

                def __exit__(self, *exc):
                    events.append("released")

            return Held()

    measured = lane.Lane.__new__(lane.Lane)
    measured.machine_lock = Lock()
    monkeypatch.setattr(lane.Lane, "_measure_once",
                        lambda self, *a: (events.append("measured"), (None, False))[1])
    monkeypatch.setattr(lane.Lane, "_start_ahead", lambda self, build_dir: events.append("started"))
    measured.measure(None, None, 1.0)
    assert events == ["started", "locked", "measured", "released"]


def test_a_lock_file_made_under_a_shutting_umask_gets_its_owners_mode(tmp_path):
    """Round 35: a run whose umask shuts its files (0777) made lock files of mode 0, which the next
    run of a non-root user could not open, so it moved the held file aside and measured beside it.
    The creator now sets 0600 on what it made."""
    code = ("import os; os.umask(0o777)\nfrom pathlib import Path\n"
            "from warpk.evaluator.lane_lock import LaneLock\n"
            f"with LaneLock((3,), base=Path({str(tmp_path)!r})).held():\n    pass\n")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
    folder = tmp_path / f"warpk-timing-{os.getuid()}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "core-0003").stat().st_mode) == 0o600


def _as_nobody():
    os.setgid(65534)
    os.setuid(65534)


def test_a_lock_file_shut_to_a_non_root_owner_is_waited_for_not_moved_aside():
    """Round 35, as a non-root user (nobody, where the suite runs as root): the holder's umask 0777
    shuts the files; the next run waits for the holder instead of moving its file aside."""
    pre = _as_nobody if os.getuid() == 0 else None
    exe = "/usr/bin/python3" if pre else sys.executable
    if not Path(exe).exists():
        pytest.skip(f"no {exe} to run as user nobody")
    probe = subprocess.run([exe, "-c", "import warpk.evaluator.lane_lock"], cwd=REPO, preexec_fn=pre,
                           capture_output=True, text=True)  # fmt: skip
    if probe.returncode:
        pytest.skip(f"this checkout cannot be imported as user nobody: {probe.stderr.strip()[-200:]}")
    base = Path(tempfile.mkdtemp(prefix="warpk-lane-lock-test-", dir="/tmp"))  # reachable by nobody
    base.chmod(0o777)
    try:
        _waits_for_the_shut_holder(base, exe, pre)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _waits_for_the_shut_holder(tmp_path: Path, exe: str, pre) -> None:
    take = ("import os, time; os.umask(0o777)\nfrom pathlib import Path\n"
            "from warpk.evaluator.lane_lock import LaneLock\n"
            f"with LaneLock((0,), base=Path({str(tmp_path)!r})).held():\n"
            "    print('held', flush=True); time.sleep({})\n")

    def run(hold_s):
        return subprocess.Popen([exe, "-c", take.format(hold_s)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                                preexec_fn=pre)  # fmt: skip

    holder = run(3)
    assert holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    waiter = run(0)
    assert waiter.stdout.readline().strip() == "held"
    waited = time.monotonic() - start
    holder.wait(10)
    waiter.wait(10)
    folder = next(tmp_path.glob("warpk-timing-*"))
    moved = [p.name for p in folder.iterdir() if ".moved-" in p.name]
    assert waited > 2.0 and not moved, (waited, moved)


def test_a_hold_is_logged_where_asked(tmp_path, monkeypatch):
    """WARPK_LANE_LOG (benchmarks/lane_holds.py): one line a hold, asked <= got <= released."""
    log = tmp_path / "holds"
    monkeypatch.setenv("WARPK_LANE_LOG", str(log))
    with LaneLock((5,), base=tmp_path).held():
        pass
    pid, asked, got, released, test = log.read_text().split()
    assert int(pid) == os.getpid() and float(asked) <= float(got) <= float(released)
    assert test.startswith("tests/unit/test_lane_lock.py::test_a_hold_is_logged_where_asked")
