"""`ServingEnv`: LLM serving with continuous batching, as a gymnasium environment.

One step is one control period (`runtime.control_period_s`): the action sets the power cap, the
clock profile and the concurrency limit, then the server runs iteration by iteration until the
period ends. The scheduler is vLLM-like without chunked prefill: waiting requests are admitted in
arrival order while fewer than `concurrency` run, admitted prompts are prefilled together in one
iteration (up to `max_prefill_tokens`), otherwise all running sequences decode one token per
iteration. Consecutive decode iterations with the same batch are advanced together up to the next
event (an arrival that can be admitted, a completion, the end of the period), which is exact for
the model and keeps an episode to milliseconds. Iteration costs come from `CostModel` (measured
fit + modelled cap/clock effect); with nothing to do the GPU draws the measured idle power. The
server's state and its iteration loop are `Server`'s (server.py), in plain Python numbers.

After the last step the server drains the requests already arrived (no new arrivals, last
setting), so every request of the episode has a TTFT and an E2E and the energy per request counts
all the work.

Reward of a step: -energy_weight * (energy - completed * e_ref) / (expected requests * e_ref)
- sla_weight * sla_penalty * late requests / expected requests (the weights are the run's
`reward.beta_energy` and `reward.gamma_sla`: 1 and 1 in M4's `reward=hrl`), where e_ref is the
modelled energy of one typical request at the default setting (a scale, not a result) and a
request is late if its TTFT or E2E exceeds the `sla` limit, counted in the step where that
becomes certain (its age passes a limit while it waits or runs, or it finishes late). The
completion credit stops a policy from saving energy by leaving work undone.

Non-goals: no preemption, no KV-cache capacity limit, no chunked prefill, no multi-GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

from warpk.config import ClockProfile, HardwareConfig, RunConfig, RuntimeConfig, SlaConfig
from warpk.paths import from_repo
from warpk.runtime.serving.calibration import (
    Calibration,
    CalibrationError,
    CostModel,
    PhaseScale,
    fit_costs,
    load_calibration,
)
from warpk.runtime.serving.server import Server, Window, p95
from warpk.runtime.serving.workload import Trace, make_trace


def calibration_path(config: RunConfig) -> Path:
    """runtime.calibration, a relative path taken from the repository root."""
    return from_repo(config.runtime.calibration)


def served_calibration(config: RunConfig) -> Calibration:
    """runtime.calibration, loaded (a test fixture only with runtime.allow_fixture_calibration)
    and checked to be of hardware@runtime.served's GPU; CalibrationError says why not."""
    cal = load_calibration(calibration_path(config), allow_fixture=config.runtime.allow_fixture_calibration)
    served = config.runtime.served
    if not (served.gpu_name and served.gpu_name in cal.gpu):
        raise CalibrationError(
            f"hardware@runtime.served={served.name} but runtime.calibration={cal.path} was measured on "
            f"{cal.gpu}: measure one on that GPU (benchmarks/calibrate_serving.py)")  # fmt: skip
    return cal


def reward_weights(config: RunConfig) -> dict:
    """The serving env's reward weights from the run's `reward` group: energy = beta_energy,
    SLA = gamma_sla (x runtime.sla_penalty). A reward that weighs neither is refused at preflight
    (RunConfig.check): PPO would be rewarded for finished requests only."""
    r = config.reward
    return {"energy_weight": r.beta_energy, "sla_weight": r.gamma_sla}


OBS_NAMES = (
    "waiting_per_max_concurrency",
    "running_per_max_concurrency",
    "arrival_rate_per_nominal",
    "ttft_p95_recent_per_limit",
    "e2e_p95_recent_per_limit",
    "oldest_wait_per_ttft_limit",
    "oldest_running_age_per_e2e_limit",
    "power_per_tdp",
    "prefill_share_of_busy",
    "busy_share",
    "cap_index",
    "clock_index",
    "concurrency_index",
    "episode_progress",
)
OBS_MAX = 10.0
RECENT_WINDOWS = 3  # the "recent" percentiles cover the requests finished in the last 3 periods


@dataclass(frozen=True)
class Setting:
    """One point of the action grid."""

    cap_w: float
    clock: ClockProfile
    concurrency: int

    @property
    def label(self) -> str:
        return f"{self.cap_w:.0f}W/{self.clock.name}/c{self.concurrency}"


def action_grid(hardware: HardwareConfig, runtime: RuntimeConfig) -> tuple[tuple, tuple, tuple]:
    """(caps_w from max down to min, clock profiles, concurrency choices ascending)."""
    if hardware.power_cap_min_w is None or hardware.power_cap_max_w is None or not hardware.clock_profiles:
        raise ValueError(f"hardware={hardware.name} has no power-cap range or clock profiles to control")
    caps, cap = [], hardware.power_cap_max_w
    while cap >= hardware.power_cap_min_w - 1e-9:
        caps.append(float(cap))
        cap -= runtime.actuator.power_cap_step_w
    return tuple(caps), tuple(hardware.clock_profiles), tuple(sorted(runtime.actuator.concurrency_choices))


@dataclass(frozen=True)
class EpisodeResult:
    """What one episode measured in the simulator (all requests arrived, served to the end)."""

    seed: int
    requests: int
    energy_j: float
    energy_per_request_j: float
    ttft_p95_s: float
    e2e_p95_s: float
    sla_attainment: float  # share of requests with TTFT <= limit and E2E <= limit
    throughput_rps: float  # requests / time until the last one finished
    sla_met: bool  # TTFT p95 and E2E p95 both within the limits


class ServingEnv(gym.Env):
    """Serving one model on one simulated GPU; MultiDiscrete([caps, clocks, concurrency]) actions."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        runtime: RuntimeConfig,
        sla: SlaConfig,
        hardware: HardwareConfig,
        calibration: Calibration,
        kernel_scale: PhaseScale | None = None,
        energy_weight: float = 1.0,
        sla_weight: float = 1.0,
    ):
        max_calibrated = max(p.batch for p in calibration.decode)
        if max(runtime.actuator.concurrency_choices) > max_calibrated:
            raise ValueError(
                f"runtime.actuator.concurrency_choices={runtime.actuator.concurrency_choices} goes beyond "
                f"the largest calibrated decode batch ({max_calibrated}) of {calibration.path}"
            )
        self.runtime, self.sla, self.hardware = runtime, sla, hardware
        self.energy_weight, self.sla_weight = energy_weight, sla_weight
        self.cost = CostModel(
            fit_costs(calibration.prefill, calibration.decode, calibration.idle_power_w),
            runtime.actuator.sm_clock_max_mhz,
            runtime.fixed_power_share,
        )
        self.caps_w, self.clocks, self.concurrency = action_grid(hardware, runtime)
        self.action_space = gym.spaces.MultiDiscrete(
            [len(self.caps_w), len(self.clocks), len(self.concurrency)]
        )
        self.observation_space = gym.spaces.Box(0.0, OBS_MAX, shape=(len(OBS_NAMES),), dtype=np.float32)
        self.period_s = runtime.control_period_s
        self.expected_requests = runtime.workload.arrival_rate_rps * self.period_s
        self.e_ref_j = self._reference_request_energy()  # of the calibrated model: M4 and M5 share it
        self._action_sizes = tuple(max(int(size) - 1, 1) for size in self.action_space.nvec)
        self._settings: dict[tuple[int, int, int], Setting] = {}  # action -> its Setting, made once
        self.trace: Trace | None = None
        self.set_kernel_scale(kernel_scale)

    def set_kernel_scale(self, scale: PhaseScale | None) -> None:
        """M5: scale the measured phase costs by deployed kernels' multipliers (None = unchanged).
        The reward scale `e_ref_j` stays the calibrated one, so rewards keep their units."""
        self.cost = CostModel(self.cost.fit, self.cost.f_max, self.cost.fixed_share, scale)

    def _reference_request_energy(self) -> float:
        """Modelled energy of one typical request at max cap and default clock, batch 16 (a scale)."""
        w, cap = self.runtime.workload, self.caps_w[0]
        p = w.prompt_tokens_mean
        _, e_prefill = self.cost.prefill(p, p * p, cap, None)
        batch = 16
        _, e_step = self.cost.decode_step(batch, batch * (p + w.output_tokens_mean / 2), cap, None)
        return e_prefill + w.output_tokens_mean * e_step / batch

    def setting(self, action) -> Setting:
        """The grid point of an action (each made once: every step asks)."""
        cap, clock, concurrency = (int(a) for a in action)
        s = self._settings.get((cap, clock, concurrency))
        if s is None:
            s = Setting(self.caps_w[cap], self.clocks[clock], self.concurrency[concurrency])
            self._settings[(cap, clock, concurrency)] = s
        return s

    # --- the server's times, as arrays (env.py's callers, tests and probes read them) -------
    @property
    def first_token_s(self) -> np.ndarray:
        return np.array(self.server.first_token_s, dtype=np.float64)

    @property
    def finish_s(self) -> np.ndarray:
        return np.array(self.server.finish_s, dtype=np.float64)

    @property
    def energy_j(self) -> float:
        return self.server.energy_j

    # --- gymnasium API -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rt = self.runtime
        duration_s = rt.episode_steps * self.period_s
        self.trace = make_trace(rt.workload, self.np_random, duration_s, rt.max_prefill_tokens)
        self.server = Server(self.trace, rt.max_prefill_tokens)
        self.step_index = 0
        self.rate_estimate = self.runtime.workload.arrival_rate_rps
        self.recent: list[tuple[list[float], list[float]]] = []  # (TTFTs, E2Es) of recent periods
        self.last_action = (0, 0, 0)
        self.p95 = (0.0, 0.0)
        return self._observation(), self._info([], [], 0)

    def step(self, action):
        assert self.trace is not None, "call reset() first"
        s = self.setting(action)
        self.last_action = tuple(int(a) for a in action)
        server, cost = self.server, self.cost.at(s.cap_w, s.clock.sm_clock_mhz)
        server.window = Window()
        arrived_before = server.arrived
        t_end = (self.step_index + 1) * self.period_s
        finished = server.serve(cost, s.concurrency, t_end, drain=False)
        self.step_index += 1
        arrivals = server.arrived - arrived_before
        self.rate_estimate = 0.5 * self.rate_estimate + 0.5 * arrivals / self.period_s
        truncated = self.step_index >= self.runtime.episode_steps
        if truncated:  # serve what has arrived to the end, with the last setting
            finished += server.serve(cost, s.concurrency, math.inf, drain=True)
        ttft_s, e2e_s = server.latencies_s(finished)
        self.recent = (self.recent + [(ttft_s, e2e_s)])[-RECENT_WINDOWS:]
        self.p95 = self._recent_p95()
        late = server.newly_late(self.sla.ttft_p95_s, self.sla.e2e_p95_s)
        scale = max(self.expected_requests, 1.0)
        energy = (server.window.energy_j - len(finished) * self.e_ref_j) / (scale * self.e_ref_j)
        reward = -self.energy_weight * energy - self.sla_weight * self.runtime.sla_penalty * late / scale
        return self._observation(), float(reward), False, truncated, self._info(finished, e2e_s, late)

    # --- observation and metrics -------------------------------------------------------------
    def _late(self, idx: np.ndarray) -> np.ndarray:
        arrival = self.trace.arrival_s[idx]
        return ((self.first_token_s[idx] - arrival) > self.sla.ttft_p95_s) | (
            (self.finish_s[idx] - arrival) > self.sla.e2e_p95_s
        )

    def _recent_p95(self) -> tuple[float, float]:
        ttft_s = [v for window in self.recent for v in window[0]]
        if not ttft_s:
            return 0.0, 0.0
        return p95(ttft_s), p95([v for window in self.recent for v in window[1]])

    def _observation(self) -> np.ndarray:
        server, max_c = self.server, self.concurrency[-1]
        ttft, e2e = self.p95
        waiting = server.arrived - server.admitted
        oldest = server.t - server.arrival_s[server.admitted] if waiting > 0 else 0.0
        # the oldest running request is the first admitted: admission follows arrival order
        oldest_running = server.t - server.arrival_s[server.oldest_running] if server.running else 0.0
        window = server.window
        busy = window.prefill_s + window.decode_s
        obs = [
            waiting / max_c,
            server.running / max_c,
            self.rate_estimate / self.runtime.workload.arrival_rate_rps,
            ttft / self.sla.ttft_p95_s,
            e2e / self.sla.e2e_p95_s,
            oldest / self.sla.ttft_p95_s,
            oldest_running / self.sla.e2e_p95_s,
            window.energy_j / self.period_s / (self.hardware.tdp_w or 1.0),
            window.prefill_s / busy if busy > 0 else 0.0,
            busy / self.period_s,
            *(a / size for a, size in zip(self.last_action, self._action_sizes, strict=True)),
            self.step_index / self.runtime.episode_steps,
        ]
        return np.clip(np.asarray(obs, dtype=np.float32), 0.0, OBS_MAX)

    def _info(self, finished: list[int], e2e_s: list[float], late: int) -> dict:
        ttft, e2e = self.p95
        server = self.server
        return {
            "energy_j": server.window.energy_j,
            "completed": len(finished),
            "late": late,
            "e2e_mean_s": float(np.mean(e2e_s)) if len(finished) else 0.0,  # numpy's sum order, kept
            "waiting": server.arrived - server.admitted,
            "running": server.running,
            "ttft_p95_recent_s": ttft,
            "e2e_p95_recent_s": e2e,
            "time_s": server.t,
        }

    def result(self, seed: int) -> EpisodeResult:
        """Metrics of the finished episode (after the step that returned truncated=True)."""
        n = len(self.trace.arrival_s)
        if n == 0 or np.isnan(self.finish_s).any():
            raise RuntimeError("the episode is not finished (or had no requests)")
        idx = np.arange(n)
        ttft = self.first_token_s - self.trace.arrival_s
        e2e = self.finish_s - self.trace.arrival_s
        ttft_p95, e2e_p95 = float(np.percentile(ttft, 95)), float(np.percentile(e2e, 95))
        return EpisodeResult(
            seed=seed,
            requests=n,
            energy_j=self.energy_j,
            energy_per_request_j=self.energy_j / n,
            ttft_p95_s=ttft_p95,
            e2e_p95_s=e2e_p95,
            sla_attainment=float(1.0 - np.mean(self._late(idx))),
            throughput_rps=n / float(np.nanmax(self.finish_s)),
            sla_met=ttft_p95 <= self.sla.ttft_p95_s and e2e_p95 <= self.sla.e2e_p95_s,
        )
