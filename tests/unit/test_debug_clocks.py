"""The debug log's clock reader (warpk.evaluator.debug_clocks): off unless asked for on a GPU, and
where NVML cannot be read it says so once and reads "?", never failing the timing."""

import torch

from warpk.evaluator import timing_phase
from warpk.evaluator.debug_clocks import DebugClocks


def test_it_is_off_without_the_debug_log_or_a_gpu(monkeypatch):
    monkeypatch.delenv("WARPK_DEBUG_TIMING", raising=False)
    assert timing_phase.debug_clocks(torch) is None
    monkeypatch.setenv("WARPK_DEBUG_TIMING", "1")
    if not torch.cuda.is_available():
        assert timing_phase.debug_clocks(torch) is None


def test_an_unreadable_device_reads_as_unknown(capsys):
    class NoDevice:
        class cuda:  # noqa: N801 - torch's name
            @staticmethod
            def current_device():
                raise RuntimeError("no CUDA device")

    clocks = DebugClocks(NoDevice)
    assert clocks.read() == "?" and clocks.read() == "?"
    assert capsys.readouterr().err.count("debug clocks: not read") == 1
