"""`ServingEnv`: LLM serving with continuous batching, as a gymnasium environment.

One step is one control period (`runtime.control_period_s`): the action sets the power cap, the
clock profile and the concurrency limit, then the server runs iteration by iteration until the
period ends. The scheduler is vLLM-like without chunked prefill: waiting requests are admitted in
arrival order while fewer than `concurrency` run, admitted prompts are prefilled together in one
iteration (up to `max_prefill_tokens`), otherwise all running sequences decode one token per
iteration. Consecutive decode iterations with the same batch are advanced together up to the next
event (an arrival that can be admitted, a completion, the end of the period), which is exact for
the model and keeps an episode to milliseconds. Iteration costs come from `CostModel` (measured
fit + modelled cap/clock effect); with nothing to do the GPU draws the measured idle power.

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
        a = np.asarray(action, dtype=np.int64)
        return Setting(self.caps_w[a[0]], self.clocks[a[1]], self.concurrency[a[2]])

    # --- gymnasium API -----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rt = self.runtime
        duration_s = rt.episode_steps * self.period_s
        self.trace = make_trace(rt.workload, self.np_random, duration_s, rt.max_prefill_tokens)
        n = len(self.trace.arrival_s)
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.run_idx = np.zeros(0, dtype=np.int64)
        self.remaining = np.zeros(0, dtype=np.int64)
        self.context = np.zeros(0, dtype=np.int64)
        self.t, self.step_index, self.arrived, self.admitted = 0.0, 0, 0, 0
        self.energy_j = 0.0
        self.rate_estimate = self.runtime.workload.arrival_rate_rps
        self.recent: list[np.ndarray] = []
        self.last_action = np.zeros(3, dtype=np.int64)
        self.counted_late = np.zeros(n, dtype=bool)
        self.p95 = (0.0, 0.0)
        self.window = {"energy_j": 0.0, "prefill_s": 0.0, "decode_s": 0.0}
        return self._observation(), self._info(np.zeros(0, dtype=np.int64), 0)

    def step(self, action):
        assert self.trace is not None, "call reset() first"
        self.last_action = np.asarray(action, dtype=np.int64)
        s = self.setting(action)
        self.window = {"energy_j": 0.0, "prefill_s": 0.0, "decode_s": 0.0}
        arrived_before = self.arrived
        t_end = (self.step_index + 1) * self.period_s
        finished = self._serve(s, t_end, drain=False)
        self.step_index += 1
        arrivals = self.arrived - arrived_before
        self.rate_estimate = 0.5 * self.rate_estimate + 0.5 * arrivals / self.period_s
        truncated = self.step_index >= self.runtime.episode_steps
        if truncated:  # serve what has arrived to the end, with the last setting
            finished = np.concatenate([finished, self._serve(s, math.inf, drain=True)])
        self.recent = (self.recent + [finished])[-RECENT_WINDOWS:]
        self.p95 = self._recent_p95()
        late = self._newly_late()
        scale = max(self.expected_requests, 1.0)
        energy = (self.window["energy_j"] - len(finished) * self.e_ref_j) / (scale * self.e_ref_j)
        reward = -self.energy_weight * energy - self.sla_weight * self.runtime.sla_penalty * late / scale
        return self._observation(), float(reward), False, truncated, self._info(finished, late)

    # --- the server --------------------------------------------------------------------------
    def _serve(self, s: Setting, t_end: float, drain: bool) -> np.ndarray:
        """Run iterations until t_end (or, draining, until every arrived request is done)."""
        tr, cost, w = self.trace, self.cost, self.window
        n = len(tr.arrival_s) if not drain else self.arrived
        clock = s.clock.sm_clock_mhz
        done: list[np.ndarray] = []
        while True:
            if not drain:
                self.arrived = int(np.searchsorted(tr.arrival_s, self.t, side="right"))
            if self.t >= t_end or (drain and self.admitted >= n and not len(self.run_idx)):
                break
            waiting, room = self.arrived - self.admitted, s.concurrency - len(self.run_idx)
            if waiting > 0 and room > 0:
                idx = self._admit(min(waiting, room))
                p = tr.prompt_tokens[idx].astype(np.float64)
                dt, e = cost.prefill(p.sum(), (p * p).sum(), s.cap_w, clock)
                self.t += dt
                w["energy_j"] += e
                w["prefill_s"] += dt
                self.first_token_s[idx] = self.t
                self.run_idx = np.concatenate([self.run_idx, idx])
                self.remaining = np.concatenate([self.remaining, tr.output_tokens[idx] - 1])
                self.context = np.concatenate([self.context, tr.prompt_tokens[idx] + 1])
            elif len(self.run_idx):
                b, context = len(self.run_idx), float(self.context.sum())
                dt1, _ = cost.decode_step(b, context, s.cap_w, clock)
                k = int(self.remaining.min())  # >= 1: finished sequences leave below
                if room > 0 and self.arrived < n and not drain:
                    k = min(k, max(1, math.ceil((tr.arrival_s[self.arrived] - self.t) / dt1)))
                if not drain:
                    k = min(k, max(1, math.ceil((t_end - self.t) / dt1)))
                dt, e = cost.decode_step(b, context + b * (k - 1) / 2, s.cap_w, clock)
                self.t += k * dt
                w["energy_j"] += k * e
                w["decode_s"] += k * dt
                self.remaining -= k
                self.context += k
            else:  # idle until the next arrival or the end of the period
                nxt = tr.arrival_s[self.arrived] if self.arrived < n else math.inf
                t_next = min(nxt, t_end)
                w["energy_j"] += cost.fit.idle_power_w * (t_next - self.t)
                self.t = t_next
            mask = self.remaining <= 0
            if mask.any():
                ended = self.run_idx[mask]
                self.finish_s[ended] = self.t
                done.append(ended)
                keep = ~mask
                self.run_idx, self.remaining, self.context = (
                    self.run_idx[keep],
                    self.remaining[keep],
                    self.context[keep],
                )
        self.energy_j += w["energy_j"]
        return np.concatenate(done) if done else np.zeros(0, dtype=np.int64)

    def _admit(self, count: int) -> np.ndarray:
        """The next `count` waiting requests in arrival order, within the prefill token budget."""
        prompts = self.trace.prompt_tokens[self.admitted : self.admitted + count]
        fits = int(np.searchsorted(np.cumsum(prompts), self.runtime.max_prefill_tokens, side="right"))
        take = max(1, min(count, fits))
        idx = np.arange(self.admitted, self.admitted + take)
        self.admitted += take
        return idx

    # --- observation and metrics -------------------------------------------------------------
    def _late(self, idx: np.ndarray) -> np.ndarray:
        arrival = self.trace.arrival_s[idx]
        return ((self.first_token_s[idx] - arrival) > self.sla.ttft_p95_s) | (
            (self.finish_s[idx] - arrival) > self.sla.e2e_p95_s
        )

    def _newly_late(self) -> int:
        """Requests that became certain to miss a limit by now and were not counted before: late as
        soon as their age passes a limit unserved, not only when they finish (earlier credit)."""
        n = self.arrived
        arrival, now = self.trace.arrival_s[:n], self.t
        first = np.where(np.isnan(self.first_token_s[:n]), now, self.first_token_s[:n])
        finish = np.where(np.isnan(self.finish_s[:n]), now, self.finish_s[:n])
        late = ((first - arrival) > self.sla.ttft_p95_s) | ((finish - arrival) > self.sla.e2e_p95_s)
        new = late & ~self.counted_late[:n]
        self.counted_late[:n] |= new
        return int(np.count_nonzero(new))

    def _recent_p95(self) -> tuple[float, float]:
        idx = np.concatenate(self.recent) if self.recent else np.zeros(0, dtype=np.int64)
        if not len(idx):
            return 0.0, 0.0
        a = self.trace.arrival_s[idx]
        return (
            float(np.percentile(self.first_token_s[idx] - a, 95)),
            float(np.percentile(self.finish_s[idx] - a, 95)),
        )

    def _observation(self) -> np.ndarray:
        max_c = self.concurrency[-1]
        ttft, e2e = self.p95
        waiting = self.arrived - self.admitted
        oldest = self.t - self.trace.arrival_s[self.admitted] if waiting > 0 else 0.0
        running_arrivals = self.trace.arrival_s[self.run_idx]
        oldest_running = self.t - running_arrivals.min() if len(running_arrivals) else 0.0
        busy = self.window["prefill_s"] + self.window["decode_s"]
        sizes = np.maximum(np.asarray(self.action_space.nvec) - 1, 1)
        obs = [
            waiting / max_c,
            len(self.run_idx) / max_c,
            self.rate_estimate / self.runtime.workload.arrival_rate_rps,
            ttft / self.sla.ttft_p95_s,
            e2e / self.sla.e2e_p95_s,
            oldest / self.sla.ttft_p95_s,
            oldest_running / self.sla.e2e_p95_s,
            self.window["energy_j"] / self.period_s / (self.hardware.tdp_w or 1.0),
            self.window["prefill_s"] / busy if busy > 0 else 0.0,
            busy / self.period_s,
            *(self.last_action / sizes),
            self.step_index / self.runtime.episode_steps,
        ]
        return np.clip(np.asarray(obs, dtype=np.float32), 0.0, OBS_MAX)

    def _info(self, finished: np.ndarray, late: int) -> dict:
        ttft, e2e = self.p95
        return {
            "energy_j": self.window["energy_j"],
            "completed": len(finished),
            "late": late,
            "e2e_mean_s": float(np.mean(self.finish_s[finished] - self.trace.arrival_s[finished]))
            if len(finished)
            else 0.0,
            "waiting": self.arrived - self.admitted,
            "running": len(self.run_idx),
            "ttft_p95_recent_s": ttft,
            "e2e_p95_recent_s": e2e,
            "time_s": self.t,
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
