"""M4: PPO (stable-baselines3) on `ServingEnv` (the trained policy acts as
warpk.runtime.control.policies.PPOPolicy).

Training episodes come from the environments' own random streams, seeded once from the training
seed (copy i of `runtime.ppo.envs` with seed + i; `train_seeds_of` for runtime.ppo.seeds > 1);
evaluation uses fixed held-out (or, for tuning, tuning) episodes (runtime/control/evaluation.py), so no
evaluation trace is trained on. The tunable hyper-parameters are runtime.ppo.* (`hyperparameters`).
Torch runs on the CPU with one thread: the MLP is tiny and the simulator is the cost. With several
copies a rollout holds 480 // copies steps of each (all 480 when the count divides 480, e.g. 4
copies: 120 each), and the policy runs once per step of all copies, not once per copy.
With runtime.ppo.normalize, observations and rewards are scaled by running statistics while PPO
trains (sb3's VecNormalize, its default clipping at 10 standard deviations kept); the statistics
freeze at the end and `PPOPolicy` scales what it observes by them.

Non-goals: no hyperparameter search here (benchmarks/tune_runtime.py); no recurrent policy.
"""

from __future__ import annotations

from collections.abc import Callable

from warpk.config import RunConfig, RuntimeConfig
from warpk.runtime.control.selection import SELECT_EVERY_ROLLOUTS, Selection, selection_seeds
from warpk.runtime.serving.env import ServingEnv

# PPO's fixed settings: a rollout is 10 episodes of 48 steps at the defaults. The tunable ones
# (learning rate, entropy coefficient, gamma, epochs) come from runtime.ppo.* (hyperparameters).
PPO_KWARGS = dict(
    n_steps=480,
    batch_size=120,
    gae_lambda=0.9,
    policy_kwargs=dict(net_arch=[64, 64]),
)


def hyperparameters(rt: RuntimeConfig) -> dict:
    """The runtime.ppo.* knobs as sb3 PPO arguments."""
    return dict(learning_rate=rt.ppo.learning_rate, ent_coef=rt.ppo.ent_coef, gamma=rt.ppo.gamma,
                n_epochs=rt.ppo.n_epochs)  # fmt: skip


def new_ppo(env, seed: int, timesteps: int | None = None, hyper: dict | None = None):
    """An untrained PPO model with PPO_KWARGS and `hyper` (default: runtime's defaults) on `env`
    (a ServingEnv, or a VecEnv of copies, which share a rollout). `timesteps` shorter than a
    rollout shrink the rollout to fit."""
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    copies = getattr(env, "num_envs", 1)
    rollout = PPO_KWARGS["n_steps"] if timesteps is None else min(PPO_KWARGS["n_steps"], max(timesteps, 8))
    n_steps = max(rollout // copies, 2)
    batch_size = min(PPO_KWARGS["batch_size"], n_steps * copies)
    hyper = hyperparameters(RuntimeConfig()) if hyper is None else hyper
    kwargs = {**PPO_KWARGS, **hyper, "n_steps": n_steps, "batch_size": batch_size}
    from stable_baselines3.common.logger import Logger

    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    # a logger that writes nowhere: sb3's default makes an empty SB3-<time> folder in the system's
    # temp dir at every learn() (600 of them in /tmp after a few test runs)
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def train_ppo(
    make_env: Callable[[], ServingEnv],
    timesteps: int,
    seed: int,
    envs: int = 1,
    progress: Callable[[int], None] | None = None,
    hyper: dict | None = None,
    normalize: bool = False,
    select_seeds: tuple[int, ...] = (),
):
    """A PPO model trained for `timesteps` control steps on `envs` copies of `make_env()`;
    `normalize` (runtime.ppo.normalize): observations and rewards scaled by running statistics
    (sb3's VecNormalize; a late request's penalty is ~100x a step's energy term otherwise).
    `select_seeds` (runtime.selection.select_episodes): the model returned is the best checkpoint on those
    episodes (warpk.runtime.control.selection), with the `Selection` as `model.selection`; () keeps
    the last policy."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    selection = Selection(make_env(), select_seeds) if select_seeds else None

    class _Progress(BaseCallback):
        def _on_rollout_end(self) -> None:  # once per rollout, not per step: a bar redraw costs
            if progress is not None:
                progress(min(self.num_timesteps, timesteps))
            if selection is None or self.num_timesteps >= timesteps:  # the last: considered after learn()
                return
            rollout = self.model.n_steps * self.model.n_envs
            if (self.num_timesteps // rollout) % SELECT_EVERY_ROLLOUTS == 0:
                selection.consider(self.model, self.num_timesteps - rollout)  # trained on: before this update

        def _on_step(self) -> bool:
            return True

    hyper = hyperparameters(RuntimeConfig()) if hyper is None else hyper
    env = make_env() if envs == 1 and not normalize else DummyVecEnv([make_env] * envs)
    if normalize:  # the rewards' scale is their discounted return's, at PPO's own gamma
        env = VecNormalize(env, gamma=hyper["gamma"])
    model = new_ppo(env, seed, timesteps, hyper)
    # torch.distributions' argument checks cost ~12% of a run and never fire on sb3's own tensors;
    # they use no random numbers, so the trained policy is the same with or without them
    validate = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        model.learn(total_timesteps=timesteps, callback=_Progress())
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)
    if normalize:
        model.get_env().training = False  # PPOPolicy applies the observation statistics as they ended
    if selection is not None:
        selection.consider(model, model.num_timesteps)
        selection.restore(model)
        model.selection = selection  # the checkpoints considered and the one kept (best)
    if progress is not None:
        progress(timesteps)
    return model


TRAIN_SEED_STRIDE = 1000  # training seeds seed, seed+1000, ...: copy i of a model trains on seed + i


def train_seeds_of(config: RunConfig) -> list[int]:
    """The runtime.ppo.seeds training seeds of a run: its own seed first, the others 1000 apart, so
    that no env copy (seeded seed + i, i < runtime.ppo.envs) of one model replays another's and a
    sweep over seed=0,1,2 trains different models."""
    return [config.seed + TRAIN_SEED_STRIDE * k for k in range(config.runtime.ppo.seeds)]


def train_ppo_seeds(
    make_env: Callable[[], ServingEnv],
    timesteps: int,
    seeds: list[int],
    envs: int = 1,
    progress: Callable[[int, str], None] | None = None,
    hyper: dict | None = None,
    normalize: bool = False,
    select_seeds: tuple[int, ...] = (),
) -> dict[int, object]:
    """One PPO model per training seed (`train_ppo` each, one after another); `progress(done,
    note)` counts the steps of all of them."""
    models = {}
    for k, seed in enumerate(seeds):

        def update(n: int, before: int = k * timesteps, seed: int = seed) -> None:
            if progress is not None:
                progress(before + n, f"training seed {seed}: {n // envs} steps per env copy")

        models[seed] = train_ppo(make_env, timesteps, seed, envs, update, hyper, normalize, select_seeds)
    return models


def train_for_run(
    config: RunConfig, make_env: Callable[[], ServingEnv], progress: Callable[[int, str], None] | None = None
) -> dict[int, object]:
    """The PPO models of a stage=runtime run, one per training seed, as its runtime.ppo.* keys say."""
    rt = config.runtime
    return train_ppo_seeds(make_env, rt.ppo.timesteps, train_seeds_of(config), rt.ppo.envs, progress,
                           hyperparameters(rt), rt.ppo.normalize, selection_seeds(config))  # fmt: skip
