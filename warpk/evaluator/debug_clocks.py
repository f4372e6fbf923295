"""The GPU's clocks around each timed Go, for the trusted worker's debug log only (with
WARPK_WORKER_LOGS, which sets WARPK_DEBUG_TIMING): a side's batch of a huge copy runs in one of
two speeds ~10% apart (H100, 2026-12-07, docs/benchmarks.md), and this says whether the SM or
memory clock differed when it did.

A diagnostic: nothing here reaches a record or a verdict; where NVML cannot be read it says so
once and reads nothing more.

Non-goals: no sampling during a batch (a thread here would share the trusted worker's cores).
"""

from __future__ import annotations

import sys


class DebugClocks:
    """`read()`: "sm/mem MHz" of the lane's GPU now, or "?" where NVML cannot say."""

    def __init__(self, torch):
        self.nvml = self.handle = None
        try:
            import pynvml

            from warpk.evaluator.energy import nvml_index_of

            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            index = nvml_index_of(props, pynvml)
            pynvml.nvmlInit()
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as err:  # noqa: BLE001 - a diagnostic: say it and go on without
            print(f"debug clocks: not read ({type(err).__name__}: {err})", file=sys.stderr, flush=True)

    def read(self) -> str:
        if self.handle is None:
            return "?"
        try:
            sm = self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)
            mem = self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_MEM)
            return f"{sm}/{mem}"
        except Exception:  # noqa: BLE001
            return "?"
