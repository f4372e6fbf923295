"""Which requests does M4's PPO lose that static max serves in time, and why? (TUNING and selection
episodes only, never the held-out ones.)

Trains one PPO model as `python -m warpk model=m4` does (training seed = the run's seed, with
checkpoint selection), then runs static max and PPO on the same episodes: the run's tuning
episodes and its first `--selection` selection episodes. For each request late under PPO but in
time under static max it prints the limit it missed, its output length, its TTFT and E2E under
both, and PPO's settings (cap/clock profile/concurrency) from the period it arrived in to the one
it finished in. SIMULATED: measured cost fit, MODELLED cap/clock effect.

    python benchmarks/probe_lost_requests.py sla=latency_sensitive

About 3.5-4 min on one core of this 2-core machine (training is most of it).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.__main__ import compose_config  # noqa: E402
from warpk.runtime.control.baselines import static_max  # noqa: E402
from warpk.runtime.control.evaluation import run_episode, tuning_seeds_of  # noqa: E402
from warpk.runtime.control.policies import PPOPolicy  # noqa: E402
from warpk.runtime.control.ppo import train_for_run  # noqa: E402
from warpk.runtime.control.selection import selection_seeds  # noqa: E402
from warpk.runtime.serving.env import ServingEnv, reward_weights, served_calibration  # noqa: E402


def episode(env: ServingEnv, policy, seed: int) -> dict:
    """One episode (evaluation.run_episode): per-request outcome, and the policy's setting per period."""
    settings = []
    result = run_episode(env, policy, seed, settings.append)
    tr = env.trace
    return dict(late=env._late(np.arange(len(tr.arrival_s))), arrival_s=tr.arrival_s.copy(),
                ttft_s=env.first_token_s - tr.arrival_s, e2e_s=env.finish_s - tr.arrival_s,
                output_tokens=tr.output_tokens.copy(), settings=settings,
                energy_j=result.energy_j)  # fmt: skip


NEAR = 0.05  # a request "near the limit": static max's E2E within 5% below the E2E limit


def periods_near_limit(ref: dict, period_s: float, e2e_limit_s: float, steps: int) -> int:
    """Control periods in which a request that static max serves in time, but within NEAR of the
    E2E limit, is in flight (arrived, not finished)."""
    near = ~ref["late"] & (ref["e2e_s"] > (1 - NEAR) * e2e_limit_s)
    start, end = ref["arrival_s"][near], ref["arrival_s"][near] + ref["e2e_s"][near]
    edges = np.arange(steps) * period_s
    return int(sum(np.any((start < t + period_s) & (end > t)) for t in edges))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--selection", type=int, default=12, help="selection episodes to look at too")
    parser.add_argument("overrides", nargs="*", help="warpk overrides, e.g. sla=latency_sensitive seed=0")
    args = parser.parse_args()
    config = compose_config(["model=m4", "hardware=cpu", "logger=disabled", "runtime.ppo.seeds=1",
                             *args.overrides])  # fmt: skip
    rt, sla = config.runtime, config.sla
    cal, weights = served_calibration(config), reward_weights(config)
    make = lambda: ServingEnv(rt, sla, rt.served, cal, **weights)  # noqa: E731
    started = time.monotonic()
    (model,) = train_for_run(config, make).values()
    kept = model.selection.best if hasattr(model, "selection") else "the last policy"
    print(f"PPO trained in {time.monotonic() - started:.0f} s; checkpoint kept: {kept}", flush=True)
    env, ppo = make(), PPOPolicy(model)
    lost_total = gained_total = requests = near_periods = periods = 0
    for seed in [*tuning_seeds_of(config), *selection_seeds(config)[: args.selection]]:
        ref, mine = episode(env, static_max(env), seed), episode(env, ppo, seed)
        lost = np.flatnonzero(mine["late"] & ~ref["late"])
        gained = np.flatnonzero(ref["late"] & ~mine["late"])
        lost_total, gained_total = lost_total + len(lost), gained_total + len(gained)
        requests += len(ref["late"])
        steps = len(mine["settings"])
        near_periods += periods_near_limit(ref, rt.control_period_s, sla.e2e_p95_s, steps)
        periods += steps
        clocks = dict(collections.Counter(setting.clock.name for setting in mine["settings"]))
        print(f"episode {seed}: {len(ref['late'])} requests, late: static max {ref['late'].sum()}, PPO "
              f"{mine['late'].sum()} (lost {len(lost)}, gained {len(gained)}); PPO energy / static max's "
              f"{mine['energy_j'] / ref['energy_j']:.3f}; periods per clock profile {clocks}")  # fmt: skip
        for i in lost:
            first = int(mine["arrival_s"][i] // rt.control_period_s)
            last = int((mine["arrival_s"][i] + mine["e2e_s"][i]) // rt.control_period_s)
            # after the last step the queue drains at the last setting: those periods repeat it
            settings = [mine["settings"][min(p, steps - 1)].label for p in range(first, last + 1)]
            missed = "TTFT" if mine["ttft_s"][i] > sla.ttft_p95_s else "E2E"
            print(f"  lost ({missed}): {mine['output_tokens'][i]} output tokens, arrived "
                  f"{mine['arrival_s'][i]:.1f} s; "
                  f"TTFT {ref['ttft_s'][i]:.2f} -> {mine['ttft_s'][i]:.2f} s, E2E {ref['e2e_s'][i]:.2f} -> "
                  f"{mine['e2e_s'][i]:.2f} s; PPO's settings {settings}")  # fmt: skip
    print(f"over all episodes: {requests} requests, PPO lost {lost_total} that static max served in time "
          f"and gained {gained_total}; in {near_periods} of {periods} periods ({near_periods / periods:.0%}) "
          f"a request static max finishes within {NEAR:.0%} of the E2E limit was in flight (any slowdown "
          "then can cost it its SLA)")  # fmt: skip


if __name__ == "__main__":
    main()
