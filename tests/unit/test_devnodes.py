"""A sandbox's own device nodes (red team round 69): bwrap's --dev binds the host's /dev/null and
its siblings, and where the evaluator runs as root the sandbox's uid owns them, so a candidate
changed the host's /dev/full to mode 0600. Each sandbox now gets copies; what it changes is its
copy."""

import os

import pytest

from tests.unit.test_sandbox import needs_bwrap
from tests.unit.test_seccomp import _sandboxed
from warpk.evaluator import devnodes
from warpk.evaluator.sandbox import Limits, UntrustedProcess

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="as another user, the host's nodes are not its")

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


def _touch_in_sandbox(devices: list[str]) -> str:
    return _sandboxed(TOUCH, filtered=True, devices=devices)


@needs_bwrap
@as_root
def test_what_a_sandbox_does_to_its_device_nodes_stays_with_its_copies():
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
@as_root
def test_every_worker_gets_copies_of_its_own_and_they_go_with_it():
    worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, True), {})
    folder = worker.devices.folder
    assert sorted(os.listdir(folder)) == sorted(devnodes.HOST_NODES)
    for name in devnodes.HOST_NODES:
        assert os.stat(folder / name).st_rdev == os.stat(f"/dev/{name}").st_rdev
    worker.close()
    assert not os.path.exists(folder)


@as_root
def test_where_no_copy_can_be_made_it_is_said_in_one_line_and_none_are_made(monkeypatch, tmp_path):
    # a nodev filesystem, NFS with root squashed, CAP_MKNOD dropped, a full disk (review, session 39)
    monkeypatch.setenv("WARPK_CACHE_DIR", str(tmp_path))

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(devnodes.os, "mknod", refused)
    line = devnodes.unshared_reason()
    assert "no device node could be made" in line and "WARPK_CACHE_DIR" in line and "\n" not in line
    assert devnodes.DeviceCopies().binds() == []


def test_root_in_a_user_namespace_of_its_own_needs_no_copies(monkeypatch):
    monkeypatch.setattr(devnodes.os, "geteuid", lambda: 0)
    monkeypatch.setattr(devnodes.Path, "read_text", lambda self: "0 1000 1\n")
    assert not devnodes.host_root() and devnodes.unshared_reason() is None
