"""Sealing a memfd against writing, growing and shrinking, with Linux's transient refusal retried.

Linux refuses a write seal (EBUSY) while a page of the file still holds an extra reference, after
waiting a few ms itself; the reference is transient. It happened once in a fresh-clone test run:
a correct candidate's worker died of it in the timing phase. So `seal` retries EBUSY a few times
and raises whatever remains. A retry cannot make a candidate's bytes trusted: receivers check the
seals themselves (transport.open_sealed).

Non-goals: no other fcntl; no retry of any other error.
"""

from __future__ import annotations

import errno
import fcntl
import time

SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK
# Inputs the worker uses in place: writable, so the trusted side can see a write into them, but
# never resized, so the trusted side's mapping of them cannot fault.
SIZE_SEALS = fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK
ATTEMPTS, BACKOFF_S = 5, 0.01  # sleeps of 10, 20, 30, 40 ms between the attempts: 0.1 s at most


def seal(fd: int, seals: int = SEALS) -> None:
    """Add `seals` to the memfd `fd`; OSError if Linux still refuses after ATTEMPTS tries."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            return
        except OSError as err:
            if err.errno != errno.EBUSY or attempt == ATTEMPTS:
                raise
            time.sleep(BACKOFF_S * attempt)
