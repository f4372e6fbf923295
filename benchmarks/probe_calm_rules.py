"""How much can any simple rule save at static max's SLA attainment? (Selection episodes only.)

A "calm rule" runs static max's setting except in calm periods, where it runs one slower setting.
A period is calm when fewer than `k` requests run, none waits, and the oldest running request is
younger than `age` x the E2E limit. Every rule of the grid below runs on the run's selection
episodes (never the held-out ones); for each it prints on how many episodes its attainment is
below static max's, its mean attainment minus static max's, and its energy saving (of the
means), then the largest saving at each count of episodes below. It answers whether the
attainment PPO gives up in sla=latency_sensitive is a learning failure or the price of any
saving there. No learning; SIMULATED: measured cost fit, MODELLED cap/clock effect.

    python benchmarks/probe_calm_rules.py sla=latency_sensitive

About 1 min per regime on one core of this 2-core machine.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.__main__ import compose_config  # noqa: E402
from warpk.runtime.control.baselines import CalmRule, static_max  # noqa: E402
from warpk.runtime.control.evaluation import evaluate  # noqa: E402
from warpk.runtime.control.selection import selection_seeds  # noqa: E402
from warpk.runtime.serving.env import ServingEnv, reward_weights, served_calibration  # noqa: E402

MAX_RUNNING = (4, 8, 16, 32, 64)
# (cap, clock, concurrency) indices: the default clocks at 700 W -> 1410 / 1110 MHz, 600 / 500 W,
# and 400 W at 1410 MHz (caps from 700 W down, clocks max / balanced / efficient, concurrency 128)
SLOW = ((0, 1, 4), (0, 2, 4), (1, 0, 4), (2, 0, 4), (3, 1, 4))
MAX_AGE = (0.3, 0.6, math.inf)  # x the E2E limit; inf = no age condition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("overrides", nargs="*", help="warpk overrides, e.g. sla=latency_sensitive")
    args = parser.parse_args()
    config = compose_config(["model=m4", "hardware=cpu", "logger=disabled", *args.overrides])
    rt = config.runtime
    env = ServingEnv(rt, config.sla, rt.served, served_calibration(config), **reward_weights(config))
    seeds = list(selection_seeds(config))
    ref = evaluate(env, static_max(env), seeds)
    ref_attainment = np.array([r.sla_attainment for r in ref])
    ref_energy_j = np.mean([r.energy_per_request_j for r in ref])
    print(f"static max on {len(seeds)} selection episodes: attainment {ref_attainment.mean():.4f}, "
          f"{ref_energy_j:.1f} J/request")  # fmt: skip
    rows = []
    for k, slow, age in itertools.product(MAX_RUNNING, SLOW, MAX_AGE):
        rule = CalmRule(k, slow, age)
        results = evaluate(env, rule, seeds)
        attainment = np.array([r.sla_attainment for r in results])
        saving = 1 - np.mean([r.energy_per_request_j for r in results]) / ref_energy_j
        below = int(np.sum(attainment < ref_attainment))
        rows.append((below, saving))
        delta = attainment.mean() - ref_attainment.mean()
        print(f"calm: {rule.describe(env)}: below static max on {below}/{len(seeds)}, "
              f"attainment {delta:+.4f}, saving {saving:.1%}", flush=True)  # fmt: skip
    print("largest saving of any rule, by episodes below static max:")
    for bound in sorted({b for b, _ in rows}):
        print(f"  <= {bound}: {max(s for b, s in rows if b <= bound):.1%}")


if __name__ == "__main__":
    main()
