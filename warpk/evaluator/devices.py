"""CPU or CUDA, the same way on both sides of the trust boundary: synchronisation, a timed batch
of calls, memory poisoning. The trusted worker times the reference with this code in its own
process; the untrusted worker times the candidate with its own copy (which the candidate can
rebind, so the trusted side bounds what that copy reports).

Non-goals: no torch import (callers pass the module); no verification.
"""

from __future__ import annotations

import time


class Device:
    def __init__(self, torch, kind: str):
        self.torch = torch
        self.cuda = kind == "cuda"
        self.device = torch.device("cuda:0" if self.cuda else "cpu")
        if self.cuda and not torch.cuda.is_available():
            raise RuntimeError("device=cuda requested but torch sees no CUDA device")
        self.name = torch.cuda.get_device_name(self.device) if self.cuda else "cpu"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def run_calls(self, fn, calls: list[list], last_only: bool = False) -> tuple[list, float]:
        """(outputs, milliseconds) of the calls run back to back; on a GPU timed by CUDA events
        around a device-wide synchronize, so work on any stream is inside the time. `last_only`
        keeps only the last call's output (long loops)."""
        torch = self.torch
        self.sync()

        def run() -> list:
            if not last_only:
                return [fn(*args) for args in calls]
            out = None
            for args in calls:
                out = fn(*args)
            return [out]

        if not self.cuda:
            start_ns = time.perf_counter_ns()
            outputs = run()
            return outputs, (time.perf_counter_ns() - start_ns) / 1e6
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        outputs = run()
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        return outputs, start.elapsed_time(end)

    def poison(self, calls: list[list]) -> None:
        """Fill then free blocks the size of the calls' tensors with 0xFF (NaN for floats), so
        memory the allocator hands out next reads as NaN: an output that is allocated but never
        written cannot match by accident. A check for honest bugs, not a defence."""
        torch = self.torch
        blocks = [
            torch.empty(a.numel() * a.element_size(), dtype=torch.uint8, device=a.device).fill_(255)
            for call in calls
            for a in call
            if isinstance(a, torch.Tensor)
        ]
        del blocks
