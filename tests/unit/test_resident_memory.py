"""The lane's memory watch counts each address space once: vfork children share their parent's and
each reports all of it in VmRSS (red team round 50), while forked children have their own."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from warpk.evaluator.freeze import live_view, process_tree, resident_kb

HOLDER = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
int main(int argc, char **argv) {
  size_t n = 64ul << 20;
  char *p = malloc(n);
  memset(p, 1, n);
  int shared = argv[1][0] == 'v';
  pid_t child = shared ? vfork() : fork();
  if (child == 0) { sleep(30); _exit(0); }  /* the vfork parent waits here until then */
  if (!shared) { puts("forked"); fflush(stdout); sleep(30); }
  return p[n - 1] - 1;
}
"""


def values(root: int) -> dict[int, int]:
    out = {}
    for pid in process_tree(root):
        for line in live_view(pid, "status", b"VmRSS:").splitlines():
            if line.startswith(b"VmRSS:"):
                out[pid] = int(line.split()[1])
    return out


@pytest.fixture(scope="module")
def holder(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc) on PATH")
    folder = tmp_path_factory.mktemp("holder")
    (folder / "holder.c").write_text(HOLDER)
    subprocess.run([cc, "-O0", "-o", str(folder / "holder"), str(folder / "holder.c")], check=True)
    return folder / "holder"


@pytest.mark.parametrize("how, spaces", [("vfork", 1), ("fork", 2)])
def test_each_address_space_counted_once(holder, how, spaces):
    proc = subprocess.Popen([str(holder), how], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            seen = values(proc.pid)
            if len(seen) == 2 and min(seen.values()) > 60 * 1024:
                break
            time.sleep(0.05)
        assert len(seen) == 2 and min(seen.values()) > 60 * 1024, seen
        # both report the 64 MiB; a vfork child's are its parent's, a forked child's its own copy
        assert sum(seen.values()) > 120 * 1024
        assert 60 * 1024 * spaces < resident_kb(seen) < 80 * 1024 * spaces
    finally:
        proc.kill()
        for pid in process_tree(proc.pid) - {proc.pid}:
            subprocess.run(["kill", "-9", str(pid)], check=False)
        proc.wait()
