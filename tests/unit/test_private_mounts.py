"""A sandbox of the host's root's (staying root, or dropped to nobody: warpk.evaluator.identity)
receives no mount the host adds later (review, session 39): bwrap
makes its mounts slaves of the ones it copies, so where the host's / propagates (systemd's
default), a mount added under a read-only bind (binfmt_misc's automount under /proc/sys) appeared
in a live sandbox writable. The sandbox's first process takes a private mount namespace first
(entry.private_mounts). The host's propagation is made here in a mount namespace of the test's
own (`unshare -m`), so nothing of the host changes."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.unit.test_sandbox import needs_bwrap

# the worker's mounts that still receive from a master, and all of them
COUNT = r'''
import sys, time
from pathlib import Path
from warpk.evaluator import sandbox
from warpk.evaluator.freeze import process_tree
from tests.conftest import is_python
from warpk.evaluator import identity
if sys.argv[1] == "root":  # a sandbox that stays root; "dropped": as the evaluator runs it here
    identity.drops = lambda: False
if sys.argv[1] == "control":  # as if not the host root: no private namespace
    identity.host_root = lambda: False
worker = sandbox.UntrustedProcess("bwrap", None, sandbox.Limits(2.0, 1, True), {})
try:
    found, deadline = None, time.monotonic() + 30
    while found is None and time.monotonic() < deadline:
        for pid in process_tree(worker.proc.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"warpk.evaluator.untrusted" in cmdline and is_python(pid):
                    lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                    found = sum("master:" in line for line in lines), len(lines)
            except OSError:
                continue
        time.sleep(0.05)
    print(*found)
finally:
    worker.close()
'''


def _tags(variant: str) -> tuple[int, int]:
    script = f"mount --make-rshared / && exec {sys.executable} -c '{COUNT}' {variant}"
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-500:]
    slaves, mounts = map(int, done.stdout.split())
    return slaves, mounts


@pytest.mark.slow
@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs the host's root and unshare(1)")
def test_a_root_sandbox_receives_no_mount_from_the_host():
    for variant in ("root", "dropped"):  # a sandbox dropped to nobody as well (review, session 40)
        slaves, mounts = _tags(variant)
        assert mounts > 10 and slaves == 0, variant
    control, _ = _tags("control")  # without the private namespace: most of its mounts would
    assert control > 10


@needs_bwrap
def test_where_the_private_namespace_cannot_be_made_the_preflight_says_so(root_sandbox, monkeypatch):
    from warpk.evaluator import entry, sandbox

    def refused():
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(entry, "private_mounts", refused)
    why = sandbox.worker_start_failure("bwrap", frozenset({"a set of its own: not cached"}))
    assert "mount namespace of its own" in why and "CAP_SYS_ADMIN" in why and "\n" not in why
