"""Only pages a worker touched are read out of it (CPU lanes, warpk.evaluator.remote.read_into).

A read of a worker's memory with process_vm_readv makes the page tables the range lacks, in the
worker's address space but charged to the reader's memory cgroup; memory the worker then writes
there sits on tables its own sandbox never paid for, which the file-table guard credits to it as
its page tables on cgroup v1 (red team round 52: 512 MiB written after a read of one byte per
2 MiB, 1 MiB of tables, 0 B charged; warpk.evaluator.filetable). So before a read, with the
worker frozen, every page of the range must already have its page table entry (present or
swapped, /proc/PID/pagemap), whatever the mapping: a shared one may be replaced by private
anonymous memory over the same tables once the worker is thawed (round 53), and a page in no
mapping could, before Linux 6.5, grow a stack under the read. A computed output was written; an
output over the inputs' memory (a view of an input never read) gets its pages read by the
worker's harness before it answers (untrusted.touch_pages), so an honest answer passes, and a
candidate that skips that fails only itself. An output on memory never written (torch.empty
left as it is) is refused: `crashed`, where it would have been `incorrect` (corpus 05, 17).

Non-goals: no reading (warpk.evaluator.remote).
"""

from __future__ import annotations

import array
import os

PAGE = os.sysconf("SC_PAGE_SIZE")


def untouched_page(pid: int, address: int, nbytes: int) -> int | None:
    """The first page of [address, address + nbytes) in `pid` without a page table entry, else
    None (OSError where /proc refuses)."""
    first, last = address // PAGE, (address + nbytes - 1) // PAGE
    entries = array.array("Q")
    with open(f"/proc/{pid}/pagemap", "rb", buffering=0) as pagemap:
        pagemap.seek(first * 8)
        entries.frombytes(pagemap.read((last - first + 1) * 8))
    missing = next((i for i, entry in enumerate(entries) if not entry >> 62 & 3), len(entries))
    return None if missing > last - first else (first + missing) * PAGE
