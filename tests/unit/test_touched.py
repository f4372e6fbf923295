"""Only pages a worker touched are read out of it (warpk.evaluator.touched, red team round 52)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from warpk.evaluator.protocol import ProtocolError
from warpk.evaluator.remote import read_into
from warpk.evaluator.touched import PAGE, untouched_page

# a private anonymous mapping: its first half written, its second never touched; a shared one
# never touched either (a memfd the worker answers a view of)
WORKER = """import mmap, sys
private = mmap.mmap(-1, 64 * mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
private[: 32 * mmap.PAGESIZE] = b"x" * (32 * mmap.PAGESIZE)
shared = mmap.mmap(-1, 16 * mmap.PAGESIZE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
import ctypes
at = lambda m: ctypes.addressof(ctypes.c_char.from_buffer(m))
print(at(private), at(shared), flush=True)
sys.stdin.read()
"""


@pytest.fixture
def worker():
    proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    private, shared = (int(x) for x in proc.stdout.readline().split())
    yield proc.pid, private, shared
    proc.kill()
    proc.wait()


def test_written_pages_and_untouched_shared_ones_are_read(worker):
    pid, private, shared = worker
    assert untouched_page(pid, private, 32 * PAGE) is None
    assert untouched_page(pid, shared, 16 * PAGE) is None
    into = bytearray(32 * PAGE)
    read_into(pid, private, 32 * PAGE, ctypes.addressof(ctypes.c_char.from_buffer(into)))
    assert bytes(into) == b"x" * (32 * PAGE)


def test_an_answer_on_untouched_private_pages_is_refused_before_any_read(worker):
    pid, private, _ = worker
    assert untouched_page(pid, private, 64 * PAGE) == private + 32 * PAGE
    before = _page_tables(pid)
    with pytest.raises(ProtocolError, match="never touched"):
        read_into(pid, private + 16 * PAGE, 32 * PAGE, 0)
    assert untouched_page(pid, private + 32 * PAGE, PAGE) == private + 32 * PAGE  # still no entry made
    assert _page_tables(pid) == before


def _page_tables(pid: int) -> str:
    return next(line for line in open(f"/proc/{pid}/status") if line.startswith("VmPTE"))
