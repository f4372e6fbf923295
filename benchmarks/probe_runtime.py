"""Screen PPO variants for M4 on the TUNING episodes (never the held-out ones): one training seed.

Trains PPO as stage=runtime does (runtime.ppo.* of the composed config) in the variant asked for,
then evaluates it and the two references on the run's runtime.selection.tuning_seeds episodes. Prints
J/request and SLA attainment (mean, and per episode) and the deterministic policy's most used settings.
SIMULATED: measured cost fit, MODELLED cap/clock effect. A screen, not a claim: the held-out claim
is `python -m warpk model=m4 sla=... runtime.ppo.seeds=3` (docs/runtime.md, section 5).

    python benchmarks/probe_runtime.py --variant normalised sla=throughput seed=0 \\
        runtime.selection.tuning_seeds=5

Variants: plain (PPO without normalisation), sampled (plain, acting by sampling instead of its mode),
cap700 (plain, action = clock x concurrency at the 700 W cap), load (plain, each training episode's
arrival rate x U(0.75, 1.5)), normalised (observations and rewards: runtime.ppo.normalize),
normalised-cap700 (both).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.__main__ import compose_config  # noqa: E402
from warpk.runtime.control import baselines  # noqa: E402
from warpk.runtime.control.evaluation import evaluate, tuning_seeds_of  # noqa: E402
from warpk.runtime.control.policies import PPOPolicy  # noqa: E402
from warpk.runtime.control.ppo import hyperparameters, train_ppo  # noqa: E402
from warpk.runtime.serving.env import ServingEnv, reward_weights, served_calibration  # noqa: E402

VARIANTS = ("plain", "sampled", "cap700", "load", "normalised", "normalised-cap700")
LOAD_RANGE = (0.75, 1.5)


class LoadRange(ServingEnv):
    """Training env whose episodes draw their mean arrival rate from nominal x U(LOAD_RANGE)."""

    def reset(self, *, seed=None, options=None):
        nominal = self.runtime
        super(ServingEnv, self).reset(seed=seed)  # seed the stream, then draw this episode's load
        scale = float(self.np_random.uniform(*LOAD_RANGE))
        workload = nominal.workload
        load = dataclasses.replace(workload, arrival_rate_rps=workload.arrival_rate_rps * scale)
        self.runtime = dataclasses.replace(nominal, workload=load)
        try:
            return super().reset(options=options)
        finally:
            self.runtime = nominal


def cap700(env):
    """`env` with its cap fixed at the largest (action index 0): PPO picks clock x concurrency."""
    import gymnasium as gym

    class Cap700(gym.ActionWrapper):
        def __init__(self, inner):
            super().__init__(inner)
            self.action_space = gym.spaces.MultiDiscrete(inner.action_space.nvec[1:])

        def action(self, action):
            return np.concatenate([[0], np.asarray(action, dtype=np.int64)])

    return Cap700(env)


@dataclasses.dataclass
class Probe(PPOPolicy):
    """PPOPolicy that may sample, may need the fixed cap put back, and counts its settings."""

    sample: bool = False
    fixed_cap: bool = False

    def reset(self, env: ServingEnv) -> None:
        self.env = env
        self.used = getattr(self, "used", collections.Counter())

    def act(self, obs, info):
        seen = obs if self.scale is None else self.scale(obs)
        action, _ = self.model.predict(seen, deterministic=not self.sample)
        action = np.asarray(action, dtype=np.int64)
        action = np.concatenate([[0], action]) if self.fixed_cap else action
        self.used[self.env.setting(action).label] += 1
        return action


def show(name: str, results) -> None:
    energy = np.mean([r.energy_per_request_j for r in results])
    attainment = [r.sla_attainment for r in results]
    print(f"{name:22s} J/request {energy:7.1f}  attainment {np.mean(attainment):.3f}  "
          f"per episode {[round(a, 3) for a in attainment]}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--variant", choices=VARIANTS, required=True)
    parser.add_argument("overrides", nargs="*", help="warpk overrides, e.g. sla=mixed seed=1000")
    args = parser.parse_args()
    config = compose_config(["model=m4", "hardware=cpu", "logger=disabled", *args.overrides])
    rt, sla = config.runtime, config.sla
    cal, weights = served_calibration(config), reward_weights(config)
    env = ServingEnv(rt, sla, rt.served, cal, **weights)
    kind = LoadRange if args.variant == "load" else ServingEnv
    make = lambda: kind(rt, sla, rt.served, cal, **weights)  # noqa: E731
    fixed_cap = args.variant.endswith("cap700")
    if fixed_cap:
        make = lambda: cap700(ServingEnv(rt, sla, rt.served, cal, **weights))  # noqa: E731
    started = time.monotonic()
    normalize = args.variant.startswith("normalised")
    model = train_ppo(make, rt.ppo.timesteps, config.seed, rt.ppo.envs, None, hyperparameters(rt), normalize)
    print(f"{args.variant}: PPO trained in {time.monotonic() - started:.0f} s", flush=True)
    seeds = tuning_seeds_of(config)
    show("static max", evaluate(env, baselines.static_max(env), seeds))
    show("slo-slack feedback", evaluate(env, baselines.SloSlackController(), seeds))
    probe = Probe(model, sample=args.variant == "sampled", fixed_cap=fixed_cap)
    show(f"PPO {args.variant}", evaluate(env, probe, seeds))
    print("most used settings:", probe.used.most_common(6))


if __name__ == "__main__":
    main()
