"""Which hardware profile a machine gets: `hardware=auto` reads the GPU name through NVML.

Non-goals: no profile numbers here (they live in conf/hardware/*.yaml, loaded at the front
door); no settings are ever changed on the device.
"""

from __future__ import annotations

# Substring of the NVML device name -> profile in conf/hardware/. Order matters: first match wins.
GPU_PROFILES = (("H200", "h200"), ("H100", "h100"))


class HardwareError(RuntimeError):
    """The requested hardware is not usable on this machine; the message says what to do."""


def detect_gpu_names(nvml=None) -> list[str]:
    """Names of the NVIDIA GPUs NVML reports; [] when there is no driver or no GPU.

    Args:
        nvml: the pynvml module, or a fake with the same functions (tests).
    """
    if nvml is None:
        import pynvml as nvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return []
    try:
        names = []
        for i in range(nvml.nvmlDeviceGetCount()):
            name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return names
    finally:
        nvml.nvmlShutdown()


def profile_for(gpu_names: list[str]) -> str:
    """The profile name for the GPUs of this node: 'cpu' with none, else the first GPU's profile."""
    if not gpu_names:
        return "cpu"
    for marker, profile in GPU_PROFILES:
        if marker in gpu_names[0]:
            return profile
    known = ", ".join(p for _, p in GPU_PROFILES)
    raise HardwareError(
        f"hardware=auto: GPU '{gpu_names[0]}' has no profile (known: {known}, cpu); "
        "pass hardware=<profile> explicitly or add conf/hardware/<name>.yaml"
    )


def require_device(device: str, profile: str, gpu_names: list[str] | None = None) -> None:
    """Fail with what to do when a GPU profile is asked for on a machine without a GPU."""
    if device == "cuda" and not (detect_gpu_names() if gpu_names is None else gpu_names):
        raise HardwareError(
            f"hardware={profile} needs an NVIDIA GPU and NVML finds none on this "
            "machine; use hardware=auto or hardware=cpu"
        )


def resolve_energy(requested: str, device: str, profile: str, gpu_names: list[str] | None = None) -> str:
    """The energy mode the evaluator uses: `auto` -> nvml on a cuda device, model on the CPU.

    Raises HardwareError at stage start (not per candidate) when nvml is asked for where NVML
    cannot measure: a CPU profile, or a machine whose NVML reports no GPU.
    """
    if requested == "auto":
        return "nvml" if device == "cuda" else "model"
    if requested == "nvml":
        if device != "cuda":
            raise HardwareError(
                f"evaluate.energy=nvml needs a GPU profile, but hardware={profile} runs on the CPU; "
                "use evaluate.energy=model or none, or a GPU hardware profile"
            )
        if not (detect_gpu_names() if gpu_names is None else gpu_names):
            raise HardwareError(
                "evaluate.energy=nvml needs NVML and NVML finds no GPU on this machine; "
                "use evaluate.energy=model or none"
            )
    return requested
