"""Actuators: where a controller's setting (power cap, clock profile, concurrency) goes.

- `SimulatedActuator` (default): remembers the settings; `ServingEnv` applies them in simulation.
- `NvmlActuator`: sets the GPU's power limit and locks its SM clocks through NVML. It refuses to
  exist without an explicit opt-in (runtime.actuator.nvml_opt_in=true), is used as a context manager, and
  restores the power limit it found and unlocks the clocks on exit, on an exception and on
  SIGTERM. Changing these needs root (or a privileged daemon) and must never happen on a shared
  GPU: the project's own machines only ever run it against a fake pynvml (tests).
  Concurrency is a serving-engine setting, not an NVML one: the NVML actuator leaves it to the
  scheduler.

What "restore" covers: the power limit read on entry is written back; clocks are unlocked
(`nvmlDeviceResetGpuLockedClocks`), i.e. returned to the driver's default. NVML cannot report a
clock lock that someone else set before us, so such a lock is not preserved.

Non-goals: memory clocks, persistence mode, compute mode, application clocks: never touched.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from warpk.runtime.serving.env import Setting


class ActuatorError(RuntimeError):
    """An actuator refused to act; the message says why."""


@dataclass
class SimulatedActuator:
    """Records the settings it was given; nothing outside the process changes."""

    applied: list[Setting] = field(default_factory=list)

    def __enter__(self) -> SimulatedActuator:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def apply(self, setting: Setting) -> None:
        self.applied.append(setting)


class NvmlActuator:
    """Power limit and locked SM clocks of one GPU, restored on exit (see the module docstring)."""

    def __init__(self, opt_in: bool, index: int = 0, nvml=None) -> None:
        if not opt_in:
            raise ActuatorError(
                "NvmlActuator changes the GPU's power limit and clocks; it needs "
                "runtime.actuator.nvml_opt_in=true (never on a shared GPU)"
            )
        if nvml is None:
            import pynvml as nvml
        self.nvml, self.index = nvml, index
        self.handle = None
        self.original_limit_mw: int | None = None
        self.clocks_locked = False
        self._previous_sigterm = None

    def __enter__(self) -> NvmlActuator:
        nvml = self.nvml
        nvml.nvmlInit()
        self.handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
        self.original_limit_mw = int(nvml.nvmlDeviceGetPowerManagementLimit(self.handle))
        self.min_mw, self.max_mw = (
            int(v) for v in nvml.nvmlDeviceGetPowerManagementLimitConstraints(self.handle)
        )
        self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum, frame) -> None:
        self.restore()
        raise SystemExit(128 + signum)

    def apply(self, setting: Setting) -> None:
        if self.handle is None:
            raise ActuatorError("NvmlActuator.apply outside its `with` block: nothing would restore it")
        limit_mw = int(round(setting.cap_w * 1000))
        if not self.min_mw <= limit_mw <= self.max_mw:
            raise ActuatorError(
                f"power cap {setting.cap_w:g} W is outside the GPU's range "
                f"[{self.min_mw / 1000:g}, {self.max_mw / 1000:g}] W"
            )
        self.nvml.nvmlDeviceSetPowerManagementLimit(self.handle, limit_mw)
        mhz = setting.clock.sm_clock_mhz
        if mhz is None:
            if self.clocks_locked:
                self.nvml.nvmlDeviceResetGpuLockedClocks(self.handle)
                self.clocks_locked = False
        else:
            self.nvml.nvmlDeviceSetGpuLockedClocks(self.handle, int(mhz), int(mhz))
            self.clocks_locked = True

    def restore(self) -> None:
        """Write back the power limit found on entry and unlock the clocks (idempotent)."""
        if self.handle is None:
            return
        self.nvml.nvmlDeviceSetPowerManagementLimit(self.handle, self.original_limit_mw)
        self.nvml.nvmlDeviceResetGpuLockedClocks(self.handle)
        self.clocks_locked = False

    def __exit__(self, *exc) -> None:
        try:
            self.restore()
        finally:
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
            self.handle = None
            self.nvml.nvmlShutdown()


def actuator_for(runtime) -> NvmlActuator | None:
    """Where PPO's settings go during evaluation (runtime.actuator.kind): None = simulated only, or the
    real GPU through NVML (preflight checked that `hardware` is the served GPU)."""
    return NvmlActuator(opt_in=runtime.actuator.nvml_opt_in) if runtime.actuator.kind == "nvml" else None
