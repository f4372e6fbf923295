"""The lane's memory watch (sandbox.UntrustedProcess.rss_gb: freeze.resident_values, resident_kb)
counts each address space once: vfork children share their parent's and each reports all of it in
VmRSS (red team round 50), while forked children have their own, also when their main thread has
exited (an exited thread has no address space, and kcmp calls two such the same: a review)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

import pytest

from warpk.evaluator import freeze
from warpk.evaluator.freeze import resident_kb, resident_values

HOLDER = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void *hold(void *arg) { sleep(60); return arg; }
static char *touch(void) { size_t n = 64ul << 20; char *p = malloc(n); memset(p, 1, n); return p; }
int main(int argc, char **argv) {
  char how = argv[1][0];
  if (how == 'x') {  /* three forked children, each 64 MiB of its own, their main threads gone */
    for (int i = 0; i < 3; i++) {
      if (fork() == 0) { touch(); pthread_t t; pthread_create(&t, 0, hold, 0); pthread_exit(0); }
    }
    sleep(60);
    return 0;
  }
  char *p = touch();
  pid_t child = how == 'v' ? vfork() : fork();
  if (child == 0) { sleep(60); _exit(0); }  /* the vfork parent waits here until then */
  sleep(60);
  return p[0] - 1;
}
"""


@pytest.fixture(scope="module")
def holder(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc) on PATH")
    folder = tmp_path_factory.mktemp("holder")
    (folder / "holder.c").write_text(HOLDER)
    subprocess.run([cc, "-O0", "-pthread", "-o", str(folder / "holder"), str(folder / "holder.c")],
                   check=True)
    return folder / "holder"


@contextlib.contextmanager
def held(holder, how: str, processes: int):
    """resident_values of the holder once `processes` of it each hold all of their 64 MiB and the
    figures read the same twice in a row (a child still touching its pages reads less: CI saw
    63844, 65320, 65668 kB at once), alive until the block ends: kcmp needs them."""
    proc = subprocess.Popen([str(holder), how], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        before: list[int] = []
        while time.monotonic() < deadline:
            values = resident_values(proc.pid)
            kbs = sorted(kb for _, kb in values.values())
            if sum(kb >= 64 * 1024 for kb in kbs) == processes and kbs == before:  # all pages in
                break
            before = kbs
            time.sleep(0.05)
        else:
            raise AssertionError(f"{processes} processes of 64 MiB never seen: {values}")
        yield values
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the children too, reparented or not
        proc.wait()


@pytest.mark.parametrize("how, spaces", [("vfork", 1), ("fork", 2), ("x", 3)])
def test_each_address_space_counted_once(holder, how, spaces):
    with held(holder, how, 2 if how != "x" else 3) as values:
        big = [kb for _, kb in values.values() if kb > 60 * 1024]
        if how == "x":
            assert len(set(big)) == 1  # alike: the figures kcmp is asked about
        assert 60 * 1024 * spaces < resident_kb(values) < 80 * 1024 * spaces


def test_without_kcmp_every_process_counts(holder, monkeypatch):
    with held(holder, "vfork", 2) as values:
        monkeypatch.setattr(freeze, "KCMP_SYSCALL", None)
        assert resident_kb(values) > 120 * 1024  # the parent's 64 MiB twice: more, never less
