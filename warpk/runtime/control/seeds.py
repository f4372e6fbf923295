"""The episode seeds of the runtime stages, in families that cannot overlap.

Every episode a policy is scored on is `env.reset(seed=...)` with a seed from one family:

- `heldout`: the episodes a claim is made on (runtime.selection.eval_seeds of them), never trained, tuned
  or selected on;
- `tuning`: what the baselines' sweeps and a sweep of PPO's hyper-parameters may look at
  (runtime.selection.evaluate_on=tuning evaluates there and says it is not a result);
- `selection`: PPO's checkpoint choice (runtime.selection.select_episodes);
- `validation`: the episodes that served as held-out until 2026-12-05 (seeds 1,000,000 +
  1000 x run seed + i): three successive claims looked at them, so they are kept only to
  reproduce those figures (runtime.selection.evaluate_on=validation), never for a new claim.

A seed is family base + run seed x RUN_STRIDE + i, with i < RUN_STRIDE and run seed <
MAX_RUN_SEED, so two families, two run seeds or two episodes never share a seed (tested).
Training episodes come from the training env's own random stream (warpk.runtime.control.ppo), not from
reset seeds.

Non-goals: no episodes run here (warpk.runtime.control.evaluation).
"""

from __future__ import annotations

from warpk.config import ConfigError

FAMILY_BASE = {"heldout": 4_000_000_000, "tuning": 2_000_000_000, "selection": 3_000_000_000}
RUN_STRIDE = 100_000  # episodes per family and run seed
MAX_RUN_SEED = 10_000  # run seeds 0..9999: a family spans 10^9 seeds, below the next family's base
VALIDATION_BASE, VALIDATION_STRIDE = 1_000_000, 1000  # the old held-out set, as it was


def episode_seeds(family: str, run_seed: int, n: int, start: int = 0) -> list[int]:
    """The `n` episode seeds of `family` for a run with seed `run_seed`, from its `start`-th on
    (runtime.selection.heldout_offset: a claim's fresh held-out episodes)."""
    if family == "validation":
        if not 0 <= run_seed < 1000 or n > VALIDATION_STRIDE:
            raise ConfigError(f"runtime.selection.evaluate_on=validation reproduces seeds 0-999 with <= 1000 "
                              f"episodes; got seed={run_seed}, {n} episodes")
        return [VALIDATION_BASE + VALIDATION_STRIDE * run_seed + i for i in range(n)]
    if family not in FAMILY_BASE:
        raise ValueError(f"no episode family {family!r}; families: {sorted(FAMILY_BASE)} and validation")
    if not 0 <= run_seed < MAX_RUN_SEED:
        raise ConfigError(f"seed={run_seed}: the runtime stages take run seeds 0..{MAX_RUN_SEED - 1} (their "
                          "episode families would overlap beyond)")
    if start + n > RUN_STRIDE:
        raise ConfigError(f"episodes {start}-{start + n - 1} of one family: at most {RUN_STRIDE} per "
                          "run seed")
    return [FAMILY_BASE[family] + RUN_STRIDE * run_seed + i for i in range(start, start + n)]
