"""Policies that act in `ServingEnv` for evaluation: a trained PPO model (`PPOPolicy`, acting
deterministically on observations scaled as in training) and the random floor (`RandomPolicy`).
The static and rule baselines are warpk.runtime.control.baselines'.

Non-goals: no training (warpk.runtime.control.ppo), no episodes (warpk.runtime.control.evaluation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from warpk.runtime.serving.env import ServingEnv


@dataclass
class PPOPolicy:
    """A trained PPO model acting deterministically (the mode of its action distribution), on
    observations scaled as in training when it trained under VecNormalize."""

    model: object
    name: str = "M4 PPO"
    scale: Callable[[np.ndarray], np.ndarray] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:  # the frozen VecNormalize statistics, when it trained under them
        self.scale = getattr(self.model.get_env(), "normalize_obs", None)

    def reset(self, env: ServingEnv) -> None:
        pass

    def act(self, obs: np.ndarray, info: dict) -> np.ndarray:
        action, _ = self.model.predict(obs if self.scale is None else self.scale(obs), deterministic=True)
        return np.asarray(action, dtype=np.int64)


@dataclass
class RandomPolicy:
    """Uniformly random actions from a seeded generator (the floor a trained policy must clear)."""

    seed: int = 0
    name: str = "random"

    def reset(self, env: ServingEnv) -> None:
        self.space = env.action_space
        self.rng = np.random.default_rng(self.seed)

    def act(self, obs: np.ndarray, info: dict) -> np.ndarray:
        return self.rng.integers(0, self.space.nvec)
