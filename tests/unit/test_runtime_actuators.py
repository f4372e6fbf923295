"""NvmlActuator against a fake pynvml: opt-in, limits, and restoring the card on every exit path."""

import os
import signal
from unittest import mock

import pynvml
import pytest

from warpk.config import ClockProfile
from warpk.runtime.serving.actuators import ActuatorError, NvmlActuator, SimulatedActuator
from warpk.runtime.serving.env import Setting

ORIGINAL_MW = 650_000
LOW = Setting(300.0, ClockProfile("efficient", 1110), 64)
DEFAULT = Setting(700.0, ClockProfile("max", None), 128)


def fake_nvml():
    nvml = mock.create_autospec(pynvml, instance=False)
    nvml.nvmlDeviceGetPowerManagementLimit.return_value = ORIGINAL_MW
    nvml.nvmlDeviceGetPowerManagementLimitConstraints.return_value = (200_000, 700_000)
    return nvml


def assert_restored(nvml):
    handle = nvml.nvmlDeviceGetHandleByIndex.return_value
    assert nvml.nvmlDeviceSetPowerManagementLimit.call_args_list[-1] == mock.call(handle, ORIGINAL_MW)
    nvml.nvmlDeviceResetGpuLockedClocks.assert_called_with(handle)
    nvml.nvmlShutdown.assert_called_once()


def test_refuses_without_opt_in():
    nvml = fake_nvml()
    with pytest.raises(ActuatorError, match="nvml_opt_in"):
        NvmlActuator(opt_in=False, nvml=nvml)
    nvml.nvmlInit.assert_not_called()
    nvml.nvmlDeviceSetPowerManagementLimit.assert_not_called()


def test_applies_cap_and_locked_clock_then_restores_on_exit():
    nvml = fake_nvml()
    with NvmlActuator(opt_in=True, nvml=nvml) as act:
        act.apply(LOW)
        handle = nvml.nvmlDeviceGetHandleByIndex.return_value
        nvml.nvmlDeviceSetPowerManagementLimit.assert_called_with(handle, 300_000)
        nvml.nvmlDeviceSetGpuLockedClocks.assert_called_with(handle, 1110, 1110)
        act.apply(DEFAULT)  # default clocks: the lock is released
        nvml.nvmlDeviceResetGpuLockedClocks.assert_called_with(handle)
    assert_restored(nvml)


def test_restores_limits_after_an_exception():
    nvml = fake_nvml()
    with pytest.raises(ZeroDivisionError), NvmlActuator(opt_in=True, nvml=nvml) as act:
        act.apply(LOW)
        raise ZeroDivisionError
    assert_restored(nvml)
    assert signal.getsignal(signal.SIGTERM) is not act._on_sigterm  # handler given back


def test_restores_limits_on_sigterm():
    nvml = fake_nvml()
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exit_info, NvmlActuator(opt_in=True, nvml=nvml) as act:
        act.apply(LOW)
        os.kill(os.getpid(), signal.SIGTERM)
    assert exit_info.value.code == 128 + signal.SIGTERM
    assert_restored(nvml)
    assert signal.getsignal(signal.SIGTERM) == previous


def test_refuses_a_cap_outside_the_card_range_and_acting_outside_with():
    nvml = fake_nvml()
    act = NvmlActuator(opt_in=True, nvml=nvml)
    with pytest.raises(ActuatorError, match="outside its `with`"):
        act.apply(LOW)
    with pytest.raises(ActuatorError, match="outside the GPU's range"), act:
        act.apply(Setting(150.0, ClockProfile("max", None), 8))
    assert_restored(nvml)


def test_simulated_actuator_records_settings():
    with SimulatedActuator() as act:
        act.apply(LOW)
        act.apply(DEFAULT)
    assert act.applied == [LOW, DEFAULT]
