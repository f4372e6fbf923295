"""Baselines the M4 PPO policy is compared with (notes/energy_anchors.md 5.2), weakest first.

- static max: max power cap, default clocks, max concurrency (B0);
- best static cap: a sweep over caps (default clocks, max concurrency) on tuning seeds, the
  cheapest cap meeting the SLA on all of them (B1, Zeus GlobalPowerLimitOptimizer's sweep offline);
- Zeus-style power-limit optimizer: online, inside each episode, walk the caps from max down,
  hold each for a warm-up period and measure it for `profile_steps`, then lock the cap minimising
  ZeusCost = eta * energy per request + (1 - eta) * max cap * mean E2E (our own implementation of
  the published description; serving has no iterations, so time is the request latency);
- SLO-slack feedback controller (B4): clock down one notch when the recent p95 latencies leave
  > 30% slack, up two notches when slack < 10% or requests wait; concurrency raised when requests
  wait and the batch is full (GreenLLM / VoltanaLLM EcoFreq style);
- oracle static (B2): every (cap, clock, concurrency) of the grid on the evaluation seeds
  themselves, the cheapest meeting the SLA on all of them: hindsight no static policy can beat;
- best calm rule: static max's setting except in calm periods (fewer than k requests running,
  none waiting, the oldest running younger than a share of the E2E limit), where it runs one
  slower setting; the rule (k, share, slower setting) is the cheapest of a grid at static max's
  SLA attainment or better on the tuning episodes (else the most attaining): what a hand-written
  rule gets without learning (benchmarks/probe_calm_rules.py was its first probe).

Non-goals: no learning here (ppo.py).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from warpk.runtime.control.evaluation import evaluate
from warpk.runtime.serving.env import OBS_NAMES, EpisodeResult, ServingEnv


@dataclass
class StaticPolicy:
    """The same action every step."""

    name: str
    action: tuple[int, int, int]

    def reset(self, env: ServingEnv) -> None:
        pass

    def act(self, obs: np.ndarray, info: dict) -> np.ndarray:
        return np.asarray(self.action, dtype=np.int64)


def default_clock_index(env: ServingEnv) -> int:
    """The clock profile with no locked SM clock (the driver's default), else the fastest."""
    for i, c in enumerate(env.clocks):
        if c.sm_clock_mhz is None:
            return i
    return int(np.argmax([c.sm_clock_mhz for c in env.clocks]))


def static_max(env: ServingEnv) -> StaticPolicy:
    return StaticPolicy("static max", (0, default_clock_index(env), len(env.concurrency) - 1))


def full_grid(env: ServingEnv) -> list[tuple[int, int, int]]:
    return list(
        itertools.product(range(len(env.caps_w)), range(len(env.clocks)), range(len(env.concurrency)))
    )


def sweep(
    env: ServingEnv, actions: list[tuple[int, int, int]], seeds: list[int]
) -> dict[tuple[int, int, int], list[EpisodeResult]]:
    """Every static action on every seed."""
    return {a: evaluate(env, StaticPolicy("sweep", a), seeds) for a in actions}


def pick_best(results: dict[tuple[int, int, int], list[EpisodeResult]]) -> tuple[int, int, int]:
    """The cheapest action (mean energy per request) meeting the SLA on every seed; if none does,
    the one with the highest mean SLA attainment."""
    feasible = [a for a, rs in results.items() if all(r.sla_met for r in rs)]
    if feasible:
        return min(feasible, key=lambda a: np.mean([r.energy_per_request_j for r in results[a]]))
    return max(results, key=lambda a: np.mean([r.sla_attainment for r in results[a]]))


def best_static_cap(env: ServingEnv, tuning_seeds: list[int]) -> StaticPolicy:
    clock, conc = default_clock_index(env), len(env.concurrency) - 1
    caps = [(i, clock, conc) for i in range(len(env.caps_w))]
    return StaticPolicy("best static cap", pick_best(sweep(env, caps, tuning_seeds)))


def oracle_static(
    env: ServingEnv, eval_seeds: list[int]
) -> tuple[StaticPolicy, dict[tuple[int, int, int], list[EpisodeResult]]]:
    """The hindsight-best static setting on the evaluation seeds, and the whole grid's results."""
    results = sweep(env, full_grid(env), eval_seeds)
    return StaticPolicy("oracle static", pick_best(results)), results


@dataclass
class ZeusPowerLimit:
    """Online power-limit search per episode (Zeus GlobalPowerLimitOptimizer style)."""

    eta: float = 0.5
    warmup_steps: int = 1
    profile_steps: int = 2
    name: str = "zeus power limit"

    def reset(self, env: ServingEnv) -> None:
        self.env = env
        self.clock, self.conc = default_clock_index(env), len(env.concurrency) - 1
        self.cap, self.t_in_cap, self.locked = 0, 0, None
        self.energy_j, self.completed, self.e2e_sum_s = 0.0, 0, 0.0
        self.costs: list[float] = []
        self.prev_action: np.ndarray | None = None

    def _account(self, info: dict) -> None:
        """Book the last step's window into the cap it ran at (after its warm-up)."""
        if self.prev_action is None or self.locked is not None:
            return
        self.t_in_cap += 1
        if self.t_in_cap > self.warmup_steps:
            self.energy_j += info["energy_j"]
            self.completed += info["completed"]
            self.e2e_sum_s += info["e2e_mean_s"] * info["completed"]
        if self.t_in_cap == self.warmup_steps + self.profile_steps:
            if self.completed:
                max_cap_w = self.env.caps_w[0]
                cost = self.eta * self.energy_j / self.completed + (1 - self.eta) * max_cap_w * (
                    self.e2e_sum_s / self.completed
                )
            else:
                cost = float("inf")
            self.costs.append(cost)
            self.cap += 1
            self.t_in_cap, self.energy_j, self.completed, self.e2e_sum_s = 0, 0.0, 0, 0.0
            if self.cap == len(self.env.caps_w):
                self.locked = int(np.argmin(self.costs))

    def act(self, obs: np.ndarray, info: dict) -> np.ndarray:
        self._account(info)
        cap = self.locked if self.locked is not None else self.cap
        self.prev_action = np.array([cap, self.clock, self.conc], dtype=np.int64)
        return self.prev_action


@dataclass
class SloSlackController:
    """Hysteresis on the SLO slack of the recent p95 TTFT and E2E; cap stays at max."""

    slack_down: float = 0.3
    slack_up: float = 0.1
    name: str = "slo-slack feedback"

    def reset(self, env: ServingEnv) -> None:
        self.env = env
        # clock ladder from fastest to slowest (None = default boost clock = fastest)
        f_max = env.runtime.actuator.sm_clock_max_mhz
        self.ladder = sorted(range(len(env.clocks)), key=lambda i: -(env.clocks[i].sm_clock_mhz or f_max))
        self.rung, self.conc = 0, len(env.concurrency) - 1

    def act(self, obs: np.ndarray, info: dict) -> np.ndarray:
        sla = self.env.sla
        pressure = max(info["ttft_p95_recent_s"] / sla.ttft_p95_s, info["e2e_p95_recent_s"] / sla.e2e_p95_s)
        slack = 1.0 - pressure
        waiting = info["waiting"] > 0
        if slack < self.slack_up or waiting:
            self.rung = max(0, self.rung - 2)
        elif slack > self.slack_down:
            self.rung = min(len(self.ladder) - 1, self.rung + 1)
        if waiting and info["running"] >= self.env.concurrency[self.conc]:
            self.conc = min(len(self.env.concurrency) - 1, self.conc + 1)
        return np.array([0, self.ladder[self.rung], self.conc], dtype=np.int64)


CALM_RUNNING = (4, 8, 16, 32, 64)  # calm: fewer requests than this running
CALM_AGE = (0.3, 0.6, math.inf)  # and the oldest running younger than this x the E2E limit (inf: any)
_AGE = OBS_NAMES.index("oldest_running_age_per_e2e_limit")


@dataclass
class CalmRule:
    """Static max's setting, except `slow` while fewer than `max_running` requests run, none waits
    and the oldest running is younger than `max_age` x the E2E limit."""

    max_running: int
    slow: tuple[int, int, int]
    max_age: float
    name: str = "best calm rule"
    fast: np.ndarray | None = field(default=None, init=False)  # static max's action, set by reset

    def reset(self, env: ServingEnv) -> None:
        self.fast = np.asarray(static_max(env).action)

    def act(self, obs: np.ndarray, info: dict) -> np.ndarray:
        calm = info["running"] < self.max_running and info["waiting"] == 0 and obs[_AGE] < self.max_age
        return np.asarray(self.slow) if calm else self.fast

    def describe(self, env: ServingEnv) -> str:
        age = "" if math.isinf(self.max_age) else f", oldest < {self.max_age:g} x E2E limit"
        return (f"{env.setting(self.slow).label} while < {self.max_running} running, none waiting{age}; "
                f"else {env.setting(static_max(env).action).label}")  # fmt: skip


def best_calm_rule(env: ServingEnv, tuning_seeds: list[int]) -> CalmRule:
    """The cheapest rule of the grid (CALM_RUNNING x CALM_AGE x every slower setting at max
    concurrency) whose mean SLA attainment on `tuning_seeds` is at least static max's there;
    if none is, the most attaining."""
    fast = static_max(env).action
    slow = [(cap, clock, fast[2]) for cap in range(len(env.caps_w)) for clock in range(len(env.clocks))
            if (cap, clock, fast[2]) != fast]  # fmt: skip
    if not slow:
        raise ValueError(f"the served GPU ({env.hardware.name}) has no setting slower than static max "
                         f"({env.setting(fast).label}): no calm rule can be made")  # fmt: skip
    bar = np.mean([r.sla_attainment for r in evaluate(env, static_max(env), tuning_seeds)])
    scored = []
    for k, setting, age in itertools.product(CALM_RUNNING, slow, CALM_AGE):
        results = evaluate(env, CalmRule(k, setting, age), tuning_seeds)
        attainment = float(np.mean([r.sla_attainment for r in results]))
        energy_j = float(np.mean([r.energy_per_request_j for r in results]))
        scored.append((attainment, energy_j, (k, setting, age)))
    meeting = [s for s in scored if s[0] >= bar]
    best = min(meeting, key=lambda s: s[1]) if meeting else max(scored, key=lambda s: s[0])
    return CalmRule(*best[2])
