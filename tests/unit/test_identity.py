"""Where the evaluator is root, a sandbox runs as nobody (warpk.evaluator.identity): set up by
bwrap as root, then `setpriv` to uid and gid 65534 with no capability, so nothing the kernel
checks by uid (sysctls, leases, device nodes, root-only files, root's per-user budgets: red team
rounds 68-70) is the host root's."""

import os
import stat
import time
from pathlib import Path

import pytest

from tests.conftest import is_python
from tests.unit.test_sandbox import needs_bwrap
from warpk.evaluator import identity
from warpk.evaluator.freeze import process_tree
from warpk.evaluator.mounts import open_parents
from warpk.evaluator.sandbox import Limits, UntrustedProcess

dropping = pytest.mark.skipif(not identity.drops(), reason="sandboxes drop to nobody only under root")


def _worker_status(worker: UntrustedProcess) -> dict[str, str]:
    """The untrusted worker's /proc status lines (bwrap's own processes left out)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid in process_tree(worker.proc.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if b"warpk.evaluator.untrusted" in cmdline and is_python(pid):
                return dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        time.sleep(0.05)
    raise AssertionError("no untrusted worker appeared")


def _ids(status: dict[str, str]) -> tuple:
    return (status["Uid"].split(), status["Gid"].split(), status["Groups"].split(),
            status["CapEff"].strip(), status["CapPrm"].strip())


@needs_bwrap
@dropping
def test_a_worker_runs_as_nobody_with_no_capability_and_no_group():
    worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, True), {})
    try:
        uids, gids, groups, effective, permitted = _ids(_worker_status(worker))
    finally:
        worker.close()
    assert uids == ["65534"] * 4 and gids == ["65534"] * 4 and groups == []
    assert int(effective, 16) == 0 and int(permitted, 16) == 0


@needs_bwrap
def test_a_root_sandbox_is_the_hosts_root(root_sandbox):  # the control: what the drop changes
    worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, True), {})
    try:
        uids, *_ = _ids(_worker_status(worker))
    finally:
        worker.close()
    assert uids == ["0"] * 4


@dropping
def test_a_build_dir_is_nobodys_and_one_a_root_sandbox_wrote_is_replaced(tmp_path):
    fresh = tmp_path / "torch_extensions" / "abc"
    identity.own_folder(fresh, "bwrap")
    assert (fresh.stat().st_uid, fresh.stat().st_gid) == (identity.SANDBOX_UID, identity.SANDBOX_GID)
    older = tmp_path / "torch_extensions" / "def"  # an older run's, as its root sandbox left it
    (older / "sub").mkdir(parents=True)
    (older / "sub" / "mod.so").write_bytes(b"x")
    os.symlink("/etc", older / "link")  # removed, never followed
    identity.own_folder(older, "bwrap")
    assert os.listdir(older) == [] and older.stat().st_uid == identity.SANDBOX_UID
    assert os.path.isdir("/etc/alternatives")
    identity.own_folder(fresh, "bwrap")  # nobody's already: kept as it is
    assert fresh.stat().st_uid == identity.SANDBOX_UID
    # a `process` mode worker is root: the folder nobody had is replaced by one of root's, and
    # back (review, session 40: a process run's root-owned contents under a nobody folder)
    (fresh / "lock").write_text("")
    identity.own_folder(fresh, "process")
    assert fresh.stat().st_uid == 0 and os.listdir(fresh) == []
    (fresh / "torch_ext").mkdir()
    identity.own_folder(fresh, "bwrap")
    assert fresh.stat().st_uid == identity.SANDBOX_UID and os.listdir(fresh) == []


def test_gpu_nodes_others_may_not_open_give_their_group(monkeypatch):
    modes = {"/dev/nvidia0": (0o666, 0), "/dev/nvidiactl": (0o660, 44), "/dev/nvidia-uvm": (0o660, 0)}

    def fake_stat(node):
        mode, gid = modes[node]
        return os.stat_result((stat.S_IFCHR | mode, 0, 0, 1, 0, gid, 0, 0, 0, 0))

    monkeypatch.setattr(identity.os, "stat", fake_stat)
    assert "--clear-groups" in identity.drop_command(["/dev/nvidia0"])
    # a cluster's `video` group is given; root's group never (that node stays closed to nobody)
    assert "--groups=44" in identity.drop_command(list(modes))


def test_the_folders_above_mount_points_are_made_passable():
    python = "/root/.pyenv/versions/3"
    cmd = ["bwrap", "--size", "4096", "--perms", "1777", "--tmpfs", "/tmp", "--dir", "/tmp/home",
           "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--ro-bind", python, python,
           "--ro-bind", "/usr/lib/x", "/usr/lib/x", "--bind", "/tmp/clone/.venv", "/tmp/clone/.venv",
           "--remount-ro", "/srv/ro", "--proc", "/proc", "--ro-bind-try", "/proc/sys", "/proc/sys",
           "--dev", "/dev",
           "--dev-bind", "/cache/n/null", "/dev/null", "--chdir", "/opt/x", "--", "/usr/bin/python"]
    made = open_parents(cmd)
    folders = made[3::4]
    assert folders == ["/root", "/root/.pyenv", "/tmp/clone", "/root/.pyenv/versions"]
    assert made[:3] == ["--perms", "0755", "--dir"]  # /usr/lib lies in a bind; /tmp, /proc are points


def test_where_nobody_is_not_mapped_the_sandbox_stays_root_and_says_why(monkeypatch):
    identity.undropped_reason.cache_clear()
    monkeypatch.setattr(identity.os, "geteuid", lambda: 0)
    monkeypatch.setattr(identity.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(identity, "seccomp_program", lambda: b"a filter")
    monkeypatch.setattr(identity.Path, "read_text", lambda self: "0 100000 1000\n")
    try:
        assert "not mapped" in identity.undropped_reason() and not identity.drops()
    finally:
        identity.undropped_reason.cache_clear()


@needs_bwrap
def test_a_workers_process_limit_is_lifted_to_its_hard_limit_at_least():
    """Sandboxes dropped to nobody share one process tally, checked against each forking task's
    RLIMIT_NPROC (red team rounds 71-72): a worker's is unlimited, or its hard limit where root
    lacks CAP_SYS_RESOURCE; the control: the evaluator's own soft limit lowered first."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    resource.setrlimit(resource.RLIMIT_NPROC, (min(400, hard), hard))
    try:
        worker = UntrustedProcess("bwrap", None, Limits(2.0, 1, True), {})
        try:
            pid = int(_worker_status(worker)["Pid"])
            line = next(ln for ln in Path(f"/proc/{pid}/limits").read_text().splitlines()
                        if ln.startswith("Max processes"))
        finally:
            worker.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    worker_soft = line.split()[2]
    assert worker_soft == "unlimited" or int(worker_soft) == hard
    assert worker_soft != "400" or hard == 400


def test_a_gpu_lanes_copied_nodes_are_bound_over_the_hosts_and_the_rest_is_the_hosts(monkeypatch):
    from warpk.evaluator import sandbox

    nodes = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-caps"]
    monkeypatch.setattr(sandbox, "gpu_nodes", lambda gpu: nodes if gpu == "0" else [])
    monkeypatch.setattr(sandbox.os.path, "exists", lambda path: True)  # mounts.mount's look
    copies = ["--dev-bind", "/c/nvidia0", "/dev/nvidia0", "--dev-bind", "/c/nvidiactl", "/dev/nvidiactl"]
    cmd = sandbox.bwrap_command(None, "0", None, copies, drop=False)
    onto = {}
    for at, word in enumerate(cmd[:cmd.index("--")]):
        if word == "--dev-bind":
            onto[cmd[at + 2]] = cmd[at + 1]  # the last bind onto a point is the one it sees
    assert onto == {"/dev/nvidia0": "/c/nvidia0", "/dev/nvidiactl": "/c/nvidiactl",
                    "/dev/nvidia-caps": "/dev/nvidia-caps"}


PTS_PROBE = r'''
import os
for path, flags in (("/dev/ptmx", os.O_RDWR | os.O_NOCTTY), ("/dev/pts/x", os.O_WRONLY | os.O_CREAT)):
    try:
        os.close(os.open(path, flags))
        print("opened")
    except OSError as err:
        print("refused", err.errno)
'''


@needs_bwrap
@pytest.mark.parametrize("variant", ["as run here", "root"])
def test_no_pty_and_nothing_written_under_dev_pts(variant, request):
    """The kernel has one pool of ptys for every devpts instance (red team round 72): none is
    made in a sandbox, and its /dev/pts is read-only (review, session 40: a root sandbox wrote
    there)."""
    from tests.unit.test_seccomp import _sandboxed

    if variant == "root":
        request.getfixturevalue("root_sandbox")
    assert _sandboxed(PTS_PROBE, filtered=True).split("\n") == ["refused 2", "refused 30"]
