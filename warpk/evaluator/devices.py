"""CPU or CUDA, the same way on both sides of the trust boundary: synchronisation, a batch of
calls, memory poisoning. Nothing here times anything: the trusted worker's clock does.

Non-goals: no torch import (callers pass the module); no verification.
"""

from __future__ import annotations


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

    def run_calls(self, fn, calls, last_only: bool = False) -> list:
        """The outputs of the calls run back to back, then a device-wide synchronize (work on
        any stream is done when this returns). `last_only` keeps only the last call's output
        (long loops). Untimed: the trusted worker's clock times the whole round trip."""
        if not last_only:
            outputs = [fn(*args) for args in calls]
        else:
            out = None
            for args in calls:
                out = fn(*args)
            outputs = [out]
        self.sync()
        return outputs

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
