"""Only pages a worker touched are read out of it (CPU lanes, warpk.evaluator.remote.read_into).

A read of a worker's memory with process_vm_readv makes the page tables the range lacks, in the
worker's address space but charged to the reader's memory cgroup; memory the worker then writes
there sits on tables its own sandbox never paid for, which the file-table guard credits to it as
its page tables on cgroup v1 (red team round 52: 512 MiB written after a read of one byte per
2 MiB, 1 MiB of tables, 0 B charged; warpk.evaluator.filetable). So before a read, with the
worker frozen, every page of the range must already have its page table entry (present or
swapped, /proc/PID/pagemap); a page without one is allowed only in a shared mapping (an input
memfd the worker answers a view of: the candidate cannot turn it into its anonymous memory).
An honest output is memory the worker wrote (or read: the zero page is mapped then).

Non-goals: no reading (warpk.evaluator.remote).
"""

from __future__ import annotations

import array
import os
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
MAPS_BUDGET_S = 1.0  # to read the worker's maps (their length is its choice: red team round 44)


def untouched_page(pid: int, address: int, nbytes: int) -> int | None:
    """The first page of [address, address + nbytes) in a private mapping of `pid` that has no
    page table entry, else None (a page in no mapping is left to the read, which fails there
    without making a table; OSError where /proc refuses)."""
    first, last = address // PAGE, (address + nbytes - 1) // PAGE
    entries = array.array("Q")
    with open(f"/proc/{pid}/pagemap", "rb", buffering=0) as pagemap:
        pagemap.seek(first * 8)
        entries.frombytes(pagemap.read((last - first + 1) * 8))
    missing = [(first + i) * PAGE for i, entry in enumerate(entries) if not entry >> 62 & 3]
    missing += [(first + i) * PAGE for i in range(len(entries), last - first + 1)]  # past its end
    if not missing:
        return None
    private = _private_ranges(pid, missing[0], missing[-1] + PAGE)
    return next((page for page in missing if any(start <= page < end for start, end in private)), None)


def _private_ranges(pid: int, low: int, high: int) -> list[tuple[int, int]]:
    """The private mappings of `pid` overlapping [low, high); a maps file that takes longer than
    MAPS_BUDGET_S to read counts as one private mapping over all of it."""
    found, deadline = [], time.monotonic() + MAPS_BUDGET_S
    with open(f"/proc/{pid}/maps", "rb") as maps:
        for line in maps:
            if time.monotonic() > deadline:
                return [(low, high)]
            span, perms = line.split(b" ", 2)[:2]
            start, end = (int(x, 16) for x in span.split(b"-"))
            if start < high and end > low and perms[3:4] == b"p":
                found.append((start, end))
    return found
