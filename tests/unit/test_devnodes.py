"""A sandbox's own device nodes (red team round 69): bwrap's --dev binds the host's /dev/null and
its siblings, and where a sandbox's uid is the host's root (the evaluator root and no drop to
nobody: `root_sandbox`) it owns them, so a candidate changed the host's /dev/full to mode 0600.
Each such sandbox gets copies; what it changes is its copy. A sandbox dropped to nobody cannot
change their modes but could set their times to now (round 71): it gets copies too."""

import os

import pytest

from tests.unit.test_sandbox import needs_bwrap
from tests.unit.test_seccomp import _sandboxed
from warpk.evaluator import devnodes, identity
from warpk.evaluator.sandbox import Limits, UntrustedProcess

# the same mode and the times as they are: nothing changes but the ctime of the node it reaches
TOUCH = r'''
import os
for name in ("/dev/full", "/dev/null"):
    info = os.stat(name)
    os.chmod(name, info.st_mode & 0o7777)
    os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns))
with open("/dev/null", "w") as f:
    f.write("x")
print(len(open("/dev/urandom", "rb").read(16)), open("/dev/zero", "rb").read(2) == bytes(2))
'''


# what nobody may do to a 0666 node it does not own: set its times to now (red team round 71)
TOUCH_NOW = r'''
import os
for name in ("/dev/full", "/dev/null"):
    os.utime(name)
print(len(open("/dev/urandom", "rb").read(16)), open("/dev/zero", "rb").read(2) == bytes(2))
'''


def _touch_in_sandbox(devices: list[str], code: str = TOUCH) -> str:
    return _sandboxed(code, filtered=True, devices=devices)


def _ctimes() -> dict[str, int]:
    return {name: os.stat(f"/dev/{name}").st_ctime_ns for name in ("full", "null")}


@needs_bwrap
def test_what_a_sandbox_does_to_its_device_nodes_stays_with_its_copies(root_sandbox):
    before = {name: os.stat(f"/dev/{name}").st_ctime_ns for name in ("full", "null")}
    copies = devnodes.DeviceCopies()
    try:
        assert _touch_in_sandbox(copies.binds()) == "16 True"  # the copies work as the nodes do
    finally:
        folder = copies.folder
        copies.close()
    assert {name: os.stat(f"/dev/{name}").st_ctime_ns for name in ("full", "null")} == before
    assert not os.path.exists(folder)
    # the control: with bwrap's own binds the sandbox reaches the host's nodes
    assert _touch_in_sandbox([]) == "16 True"
    assert os.stat("/dev/full").st_ctime_ns != before["full"]


@needs_bwrap
def test_a_sandbox_dropped_to_nobody_touches_only_its_copies():
    if not identity.drops():
        pytest.skip("sandboxes drop to nobody only where the evaluator is root")
    before = _ctimes()
    copies = devnodes.DeviceCopies()
    try:
        assert _touch_in_sandbox(copies.binds(), TOUCH_NOW) == "16 True"
        with pytest.raises(AssertionError, match="Operation not permitted"):  # nobody: not the owner
            _touch_in_sandbox(copies.binds())
    finally:
        copies.close()
    assert _ctimes() == before
    # the control: with bwrap's own binds nobody sets the host's nodes' times
    assert _touch_in_sandbox([], TOUCH_NOW) == "16 True"
    assert _ctimes()["full"] != before["full"]


@needs_bwrap
@pytest.mark.skipif(not identity.host_root(), reason="needs the host's root")
def test_every_worker_gets_copies_of_its_own_and_they_go_with_it():
    worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, True), {})
    folder = worker.devices.folder
    assert sorted(os.listdir(folder)) == sorted(devnodes.HOST_NODES)
    for name in devnodes.HOST_NODES:
        assert os.stat(folder / name).st_rdev == os.stat(f"/dev/{name}").st_rdev
    worker.close()
    assert not os.path.exists(folder)


def test_where_no_copy_can_be_made_it_is_said_in_one_line_and_none_are_made(root_sandbox, monkeypatch,
                                                                           tmp_path):
    # a nodev filesystem, NFS with root squashed, CAP_MKNOD dropped, a full disk (review, session 39)
    monkeypatch.setenv("WARPK_CACHE_DIR", str(tmp_path))

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(devnodes.os, "mknod", refused)
    line = devnodes.unshared_reason()
    assert "no device node could be made" in line and "WARPK_CACHE_DIR" in line and "\n" not in line
    assert devnodes.DeviceCopies().binds() == []


def test_root_in_a_user_namespace_of_its_own_needs_no_copies(monkeypatch):
    monkeypatch.setattr(identity.os, "geteuid", lambda: 0)
    monkeypatch.setattr(identity, "drops", lambda: False)
    monkeypatch.setattr(identity.Path, "read_text", lambda self: "0 1000 1\n")
    assert not identity.host_root() and devnodes.unshared_reason() is None


@pytest.mark.skipif(not os.path.exists("/dev/nvidia0") or not identity.host_root(),
                    reason="needs a GPU's nodes and the host's root")
def test_a_gpu_lanes_character_nodes_are_copied_too():
    copies = devnodes.DeviceCopies(devnodes.gpu_nodes("0"))
    try:
        copied = set(copies.copied)
        assert "/dev/nvidia0" in copied and "/dev/nvidiactl" in copied and "/dev/nvidia-caps" not in copied
        for node, copy in copies.copied.items():
            assert os.stat(copy).st_rdev == os.stat(node).st_rdev
            assert os.stat(copy).st_mode == os.stat(node).st_mode
    finally:
        copies.close()
