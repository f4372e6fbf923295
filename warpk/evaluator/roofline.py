"""The roofline floor: the shortest time a task's work can take on a hardware profile.

floor = max(FLOPs / peak FLOP/s, minimum bytes / memory bandwidth), with the most generous peak
of the profile (dense bf16 tensor cores) so that no honest kernel is ever below it. A measured
runtime below the floor is a measurement or hacking error (shared notes, exploits 18-19), and the
record becomes `implausible` instead of a reward.

The check applies on GPU profiles only: the CPU profile's figures are nominal and its timings run
from warm caches (no flush), so a CPU floor would reject honest results.
"""

from __future__ import annotations

from warpk.config import HardwareConfig


def best_peak_tflops(hardware: HardwareConfig) -> float:
    """The profile's most generous peak (dense bf16 tensor cores, or fp32 where higher)."""
    return max(hardware.peak_bf16_tflops, hardware.peak_fp32_tflops)


def floor_ms(flops: float, min_bytes: float, peak_tflops: float, mem_bandwidth_gb_s: float) -> float:
    """Milliseconds the work needs at these peaks (the trusted worker gets them in its EnergySpec)."""
    return max(flops / (peak_tflops * 1e12), min_bytes / (mem_bandwidth_gb_s * 1e9)) * 1e3


def roofline_floor_ms(flops: float, min_bytes: float, hardware: HardwareConfig) -> float:
    """Milliseconds the work needs at the profile's best peak FLOP/s and memory bandwidth."""
    return floor_ms(flops, min_bytes, best_peak_tflops(hardware), hardware.mem_bandwidth_gb_s)


def implausible_reason(runtime_ms: float, floor_ms: float, hardware: HardwareConfig) -> str | None:
    """Why a runtime is physically impossible on `hardware`, or None if it is plausible."""
    if hardware.device != "cuda" or runtime_ms >= floor_ms:
        return None
    return (
        f"runtime {runtime_ms:.4g} ms is below the roofline floor {floor_ms:.4g} ms of "
        f"hardware={hardware.name} ({floor_ms / runtime_ms:.1f}x faster than physically possible)"
    )
