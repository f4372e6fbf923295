"""Training rewards relative to static max on the same trace (runtime.reward_baseline=static_max).

Arrivals are exogenous: a burst costs every policy late requests and energy, whatever it does.
Under the plain reward most of an episode's return is the trace's, not the policy's (in
sla=latency_sensitive static max itself loses ~10% of the requests, where PPO and static max
differ by a handful), and PPO has to find the few requests its settings lost inside that noise.
`StaticMaxBaseline` steps a shadow copy of the env on the same trace at static max's setting,
in lockstep, and rewards the policy with the difference: its step reward minus the shadow's.
The shadow's reward depends on the trace alone, never on the policy's actions, so the expected
return of every policy moves by the same trace-dependent amount: the optimal policy is the same,
only the variance of the returns PPO learns from falls (a difference reward, with static max as
the default action).

Training only: the episodes PPO is selected and evaluated on run the plain env, and what is
reported (energy, SLA attainment) never comes from a reward. The shadow doubles the simulator's
cost per training step.

Non-goals: no other baseline policy; no use in stage=hrl (the config refuses it there).
"""

from __future__ import annotations

import copy

import gymnasium as gym

from warpk.runtime.baselines import static_max
from warpk.runtime.env import ServingEnv


class StaticMaxBaseline(gym.Wrapper):
    """`env` with each step's reward minus the reward static max gets in the same period of the
    same trace (info["baseline_reward"])."""

    def __init__(self, env: ServingEnv):
        super().__init__(env)
        self.shadow: ServingEnv = copy.deepcopy(env)
        self.shadow_action = static_max(env).action

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.shadow.reset(options={"trace": self.env.unwrapped.trace})
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        _, baseline, *_ = self.shadow.step(self.shadow_action)
        return obs, reward - baseline, terminated, truncated, {**info, "baseline_reward": baseline}
