"""One timing at a time per core and GPU on a machine (warpk.evaluator.lane_lock): a lane waits
for another run's lane on the same cores, not for one on other cores, and says in one line when
it waited too long; the trusted worker is told its lane's cores."""

import os
import subprocess
import tempfile
import threading

import pytest

from warpk.evaluator import lane, lane_lock
from warpk.evaluator.errors import HarnessError
from warpk.evaluator.lane_lock import LaneLock


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path


def test_a_lane_on_the_same_core_waits_and_says_so_after_its_limit(private_tmp):
    with LaneLock((2, 3)).held():
        with pytest.raises(HarnessError, match="core-0003 for 0.2 s"):
            with LaneLock((3,), wait_s=0.2).held():
                pass
        with LaneLock((0, 1), wait_s=0.2).held():  # other cores: no wait
            pass
    with LaneLock((3,), wait_s=0.2).held():  # released with the first
        pass


def test_a_lane_gets_the_lock_once_the_other_lets_go(private_tmp):
    first = LaneLock((5,), "GPU-a")
    taken, release = threading.Event(), threading.Event()

    def hold():
        with first.held():
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(10)
    got = []

    def wait():
        with LaneLock((4,), "GPU-a", wait_s=10).held():
            got.append("held")

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not got, "the same GPU on other cores did not wait"
    release.set()
    holder.join(10)
    waiter.join(10)
    assert got == ["held"]


def test_the_locks_are_taken_in_one_order():
    assert lane_lock.names((10, 2), "GPU-x") == ["core-0002", "core-0010", "gpu-GPU-x"]
    assert lane_lock.names((), None) == []


def test_a_lock_folder_that_is_not_private_is_refused(private_tmp):
    (private_tmp / "elsewhere").mkdir()
    (private_tmp / f"warpk-timing-{os.getuid()}").symlink_to(private_tmp / "elsewhere")
    with pytest.raises(HarnessError, match="not a private folder"):
        with LaneLock((0,)).held():
            pass


def test_gpu_identity_is_the_physical_device():
    class Props:
        uuid, pci_bus_id = "GPU-1234", "0000:19:00.0"

    assert lane_lock.gpu_identity(Props()) == "GPU-1234"
    Props.uuid = None
    assert lane_lock.gpu_identity(Props()) == "0000:19:00.0"


def test_the_trusted_worker_is_told_its_lanes_cores(monkeypatch):
    seen = {}

    real = subprocess.Popen

    def popen(args, *more, **kwargs):
        if "warpk.evaluator.trusted" not in args:
            return real(args, *more, **kwargs)
        seen.update(kwargs["env"])
        raise OSError("not started in this test")

    monkeypatch.setattr(subprocess, "Popen", popen)
    trusted = lane.TrustedProcess({}, 1, (0,), (1,))
    with pytest.raises(OSError):
        trusted.start()
    assert seen[lane_lock.CORES_ENV] == "1"
    # the parent's folder: the worker's own TMPDIR is private (the first version missed this)
    assert seen[lane_lock.FOLDER_ENV] == str(lane_lock.folder()) and seen["TMPDIR"] != tempfile.gettempdir()
