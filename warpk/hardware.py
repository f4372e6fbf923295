"""Which hardware profile a machine gets: `hardware=auto` reads the GPU name through NVML.

Non-goals: no profile numbers here (they live in conf/hardware/*.yaml, loaded at the front
door); no settings are ever changed on the device.
"""

from __future__ import annotations

import os

# Substring of the NVML device name -> profile in conf/hardware/. Order matters: first match wins.
GPU_PROFILES = (("H200", "h200"), ("H100", "h100"))


def usable_cores() -> int:
    """CPU cores this process may run on: its affinity (a SLURM allocation, `taskset`), not the
    node's count, which os.cpu_count() gives."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


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


def require_generator(generator: str, device: str, find_spec=None) -> None:
    """policy.generator=vllm needs a GPU profile and the vllm package; refused in one line."""
    if generator != "vllm":
        return
    if device != "cuda":
        raise HardwareError("policy.generator=vllm needs a GPU profile (vLLM runs on CUDA); "
                            "use policy.generator=hf on the CPU")
    if find_spec is None:
        from importlib.util import find_spec
    if find_spec("vllm") is None:
        raise HardwareError("policy.generator=vllm needs the vllm package, which is not installed in "
                            "this environment (pip install vllm, matching your torch); "
                            "or use policy.generator=hf")


def require_processes(processes: int, device: str, gpu_names: list[str] | None = None) -> None:
    """Training as `processes` processes on GPUs needs that many GPUs on this node."""
    if processes <= 1 or device != "cuda":
        return
    names = detect_gpu_names() if gpu_names is None else gpu_names
    if processes > len(names):
        raise HardwareError(
            f"train.processes={processes} runs one training process per GPU, but NVML finds "
            f"{len(names)} GPU(s) on this node; use train.processes={max(len(names), 1)} or a node with more"
        )


def sampler_problem(addr: str, gpu_count: int, timeout_s: float = 0.5) -> str | None:
    """Why the sampler daemon at `addr` cannot measure this process's GPUs, or None when it can:
    it answers, reads NVML (not a replayed trace), serves exactly the GPUs this process sees
    (a daemon for the whole node numbers them differently from a job that sees some), and
    stamps its samples with this host's clock."""
    import time

    from warpk.telemetry.sampler_client import SamplerClient

    def why(err: Exception) -> str:
        detail = getattr(err, "details", None)
        return f"{type(err).__name__}: {detail() if callable(detail) else err}"

    with SamplerClient(addr, timeout_s) as client:
        try:
            health = client.health()
        except Exception as err:  # noqa: BLE001 - grpc errors: nothing answers there
            return f"no sampler daemon answers at {addr} ({why(err)})"
        if health.backend != "nvml":
            return f"the sampler at {addr} plays back a recorded trace ({health.backend}), not this GPU"
        if sorted(health.gpus) != list(range(gpu_count)):
            return (f"the sampler at {addr} serves GPUs {list(health.gpus)}, but this process sees "
                    f"{gpu_count}: its indices would not be this process's")
        try:
            (first,) = client.stream(gpus=[0], interval_ms=1, max_ticks=1, timeout_s=timeout_s)
        except Exception as err:  # noqa: BLE001
            return f"the sampler at {addr} answers but streams nothing ({why(err)})"
    skew_s = abs(first.monotonic_s - time.monotonic())
    if skew_s > 1.0:
        return f"the sampler at {addr} stamps its samples {skew_s:.1f} s off this host's clock: another host?"
    return None


def resolve_energy(requested: str, device: str, profile: str, gpu_names: list[str] | None = None,
                   sampler_addr: str | None = None, problem=sampler_problem) -> str:
    """The energy mode the evaluator uses: `auto` -> on a cuda device `sampler` when a daemon at
    `sampler_addr` serves every GPU (the lane's telemetry comes with it), else `nvml`; `model`
    on the CPU.

    Raises HardwareError at stage start (not per candidate) when nvml or the sampler is asked
    for where it cannot measure: a CPU profile, a machine whose NVML reports no GPU, or (sampler)
    no daemon serving this machine's GPUs at `sampler_addr`.
    """
    if requested == "auto":
        if device != "cuda":
            return "model"
        names = detect_gpu_names() if gpu_names is None else gpu_names
        if sampler_addr and names and problem(sampler_addr, len(names)) is None:
            return "sampler"
        return "nvml"
    if requested in ("nvml", "sampler"):
        if device != "cuda":
            raise HardwareError(
                f"evaluate.energy={requested} needs a GPU profile, but hardware={profile} runs on the CPU; "
                "use evaluate.energy=model or none, or a GPU hardware profile"
            )
        names = detect_gpu_names() if gpu_names is None else gpu_names
        if not names:
            raise HardwareError(
                f"evaluate.energy={requested} needs NVML and NVML finds no GPU on this machine; "
                "use evaluate.energy=model or none"
            )
        if requested == "sampler":
            why = problem(sampler_addr, len(names)) if sampler_addr else "evaluate.sampler_addr is empty"
            if why is not None:
                raise HardwareError(
                    f"evaluate.energy=sampler: {why}; start `python -m sampler serve --addr "
                    f"{sampler_addr or '127.0.0.1:50052'}` beside the run, or use evaluate.energy=nvml"
                )
    return requested
