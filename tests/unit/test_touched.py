"""Only pages a worker touched are read out of it (warpk.evaluator.touched, red team round 52)."""

from __future__ import annotations

import ctypes
import os
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


def test_written_pages_are_read_and_untouched_shared_ones_are_not(worker):
    """Round 53: a shared mapping read untouched can be replaced by private memory over the
    tables the read made, so it needs its entries too (the harness touches its outputs)."""
    pid, private, shared = worker
    assert untouched_page(pid, private, 32 * PAGE) is None
    assert untouched_page(pid, shared, 16 * PAGE) == shared
    assert untouched_page(pid, 0, PAGE) == 0  # no mapping: refused too
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


def test_the_harness_touches_every_page_of_its_outputs_first():
    """An honest answer that is a view of input pages it never read (here: a fresh mapping never
    touched) passes once the harness has read a byte of each page."""
    import mmap

    import torch

    from warpk.evaluator.untrusted import touch_pages

    region = mmap.mmap(-1, 8 * PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    view = torch.frombuffer(region, dtype=torch.float32)[PAGE // 8:]  # from mid-page on
    assert untouched_page(os.getpid(), view.data_ptr(), view.numel() * 4) is not None
    touch_pages(torch, view)
    assert untouched_page(os.getpid(), view.data_ptr(), view.numel() * 4) is None
    del view


def test_only_outputs_over_the_inputs_are_touched_and_conjugates_are_resolved():
    """Round 54: touching every output cost 15-45 us a tensor inside the timed round trip, which
    a candidate could skip; only views of the inputs need it. And a lazy conjugate's raw bytes
    are not its values (an honest `.conj()` output crashed the harness, and before that was read
    unconjugated)."""
    import torch

    from warpk.evaluator.untrusted import input_spans

    buffer = torch.zeros(1024)
    inputs = [[buffer[:512], buffer[512:], 3]]
    (span,) = input_spans(inputs)  # one storage, once
    assert span == (buffer.data_ptr(), buffer.data_ptr() + 4096)
    z = torch.tensor([1 + 2j], dtype=torch.complex64).conj()
    assert z.detach().resolve_conj().resolve_neg().contiguous().view(torch.float32).tolist() == [1.0, -2.0]
