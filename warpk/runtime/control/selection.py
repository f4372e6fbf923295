"""Checkpoint selection for M4's PPO on selection episodes (runtime.selection.select_episodes).

PPO's last policy is not its best: across training seeds it ends anywhere from static max's SLA
attainment to 0.1 below it (docs/runtime.md, section 5). So while it trains, every
`SELECT_EVERY_ROLLOUTS` rollouts (and at the end) the deterministic policy is run on a fixed set
of selection episodes, and the checkpoint kept is the cheapest one (J/request) whose attainment
is at least static max's on every one of those episodes; when none is, the one with the highest
mean attainment. Per episode, not on the mean: most episodes have no burst that static max
misses requests in, every checkpoint ties there, and on the mean the cheapest tie would be one
that fails the rare hard episode (it did, with 8 episodes: throughput -0.067 on the tuning ones).
Selection episodes are their own seed family: never trained on, never the tuning episodes the
baselines' sweeps look at, never the held-out ones (evaluation.py).

Non-goals: no early stopping (training runs its budget); no selection against the oracle static
(static max's attainment is the stricter bar and needs no sweep).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from warpk.config import RunConfig
from warpk.runtime.control.baselines import static_max
from warpk.runtime.control.evaluation import evaluate
from warpk.runtime.control.policies import PPOPolicy
from warpk.runtime.control.seeds import episode_seeds
from warpk.runtime.serving.env import ServingEnv

SELECT_EVERY_ROLLOUTS = 20  # 10 checkpoints in M4's 100k steps (rollouts of 480), plus the last


def selection_seeds(config: RunConfig) -> tuple[int, ...]:
    """The runtime.selection.select_episodes episodes of a run (shared by its training seeds)."""
    return tuple(episode_seeds("selection", config.seed, config.runtime.selection.select_episodes))


@dataclass(frozen=True)
class Checkpoint:
    """One policy's means over the selection episodes, static max's mean attainment there, and on
    how many of them the policy's attainment was below static max's."""

    timesteps: int
    energy_per_request_j: float
    sla_attainment: float
    static_max_attainment: float
    episodes_below_static_max: int

    @property
    def meets_static_max(self) -> bool:
        return self.episodes_below_static_max == 0

    def better_than(self, other: Checkpoint | None) -> bool:
        if other is None:
            return True
        if self.meets_static_max != other.meets_static_max:
            return self.meets_static_max
        if self.meets_static_max:
            return self.energy_per_request_j < other.energy_per_request_j
        mine = (self.sla_attainment, -self.energy_per_request_j)
        return mine > (other.sla_attainment, -other.energy_per_request_j)


class Selection:
    """The best checkpoint so far of one PPO model (its weights and, when normalised, its
    observation statistics); `restore` puts it back into the model at the end of training."""

    def __init__(self, env: ServingEnv, seeds: tuple[int, ...]):
        self.env, self.seeds = env, seeds
        self.static_max_attainment = self._run(static_max(env))[1]
        self.best: Checkpoint | None = None
        self.considered: list[Checkpoint] = []
        self._state: tuple[dict, object] | None = None

    def _run(self, policy) -> tuple[np.ndarray, np.ndarray]:
        """Energy per request (J) and SLA attainment, one entry per selection episode."""
        results = evaluate(self.env, policy, self.seeds)
        return (np.array([r.energy_per_request_j for r in results]),
                np.array([r.sla_attainment for r in results]))  # fmt: skip

    def consider(self, model, timesteps: int) -> None:
        energy_j, attainment = self._run(PPOPolicy(model))
        below = int(np.sum(attainment < self.static_max_attainment))
        checkpoint = Checkpoint(timesteps, float(energy_j.mean()), float(attainment.mean()),
                                float(self.static_max_attainment.mean()), below)  # fmt: skip
        self.considered.append(checkpoint)
        if checkpoint.better_than(self.best):
            obs_rms = getattr(model.get_env(), "obs_rms", None)
            self.best = checkpoint
            self._state = (copy.deepcopy(model.policy.state_dict()), copy.deepcopy(obs_rms))

    def restore(self, model) -> Checkpoint:
        """Load the best checkpoint into `model` (its policy and observation statistics); return it."""
        if self.best is None or self._state is None:
            raise RuntimeError("no checkpoint was considered: consider() runs at least once, after training")
        weights, obs_rms = self._state
        model.policy.load_state_dict(weights)
        if obs_rms is not None:
            model.get_env().obs_rms = obs_rms
        return self.best


def selection_summary(models: dict[int, object]) -> tuple[str, dict]:
    """A line on the checkpoints kept per training seed, and their W&B metrics ({} without selection)."""
    chosen = {seed: m.selection.best for seed, m in models.items() if getattr(m, "selection", None)}
    if not chosen:
        return "PPO: the policy as training ended (runtime.selection.select_episodes=0)", {}
    parts = [f"seed {seed}: step {c.timesteps}, attainment {c.sla_attainment:.3f} vs static max "
             f"{c.static_max_attainment:.3f} (below it on {c.episodes_below_static_max} of the episodes), "
             f"{c.energy_per_request_j:.1f} J/request"
             for seed, c in chosen.items()]  # fmt: skip
    metrics = {f"ppo/selected_timesteps/{seed}": c.timesteps for seed, c in chosen.items()}
    return "PPO checkpoints kept, on the selection episodes: " + "; ".join(parts), metrics
