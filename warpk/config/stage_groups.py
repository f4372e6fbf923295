"""The schemas of the groups of the stages that train, control and report: train, runtime (and its
sections), report (warpk.config re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from warpk.config.checked import ConfigError, _Checked, number, one_of
from warpk.config.groups import HardwareConfig


@dataclass
class TrainConfig(_Checked):
    """stage=train: M0 SFT and M1-M3 GRPO (issue #5). Owned by warpk/trainers."""

    KEY: ClassVar[str] = "train"
    # The defaults are the `train=smoke` preset: `stage=train policy=tiny` in seconds on a CPU.
    # The policy preset picks its own (conf/train/: small -> small_cpu, qwen -> full).
    name: str = one_of("smoke", "smoke", "small_cpu", "full")  # the preset these values came from
    max_steps: int = number(2, 1)  # optimizer steps (GRPO, and SFT unless sft_max_steps is set)
    learning_rate: float = number(1e-5, 0.0, 1.0)  # GRPO (M1-M3)
    sft_learning_rate: float = number(2e-4, 0.0, 1.0)  # SFT (M0): a few hundred pairs, higher rate
    sft_max_steps: int | None = number(None, 1)  # SFT's optimizer steps; None = max_steps
    sft_batch_size: int | None = number(None, 1, 4096)  # SFT's pairs per step; None = per_device_batch_size
    per_device_batch_size: int = number(8, 1, 4096)  # GRPO: completions per device per step
    gradient_accumulation_steps: int = number(1, 1, 1024)
    num_generations: int = number(8, 2, 1024)  # GRPO group size: completions per prompt
    beta: float = number(0.0, 0.0, 10.0)  # GRPO KL weight; > 0 keeps a reference model
    # GRPO advantages: group = (r - group mean) / group std (trl's default), batch = / batch std,
    # none = r - group mean (Dr. GRPO): a group whose rewards differ only by timing noise then
    # keeps noise-sized advantages instead of unit-variance ones
    scale_rewards: str = one_of("group", "group", "batch", "none")
    # False: a completion cut at policy.max_new_tokens has no closing fence, scores the no-code
    # tier and that penalty is trained on (it is how the policy learns to finish in budget);
    # True drops such completions from the loss (DAPO's choice for long reasoning traces).
    mask_truncated_completions: bool = False
    # How trl sums the per-token GRPO loss. dapo (trl's default): over every token of the batch, so
    # a long failed completion weighs more than a short correct one; grpo: a mean per completion
    # first, so every completion of a group weighs the same (docs/training.md, "Does it learn?").
    loss_type: str = one_of("dapo", "dapo", "grpo", "dr_grpo", "bnpo")
    # GRPO: negative advantages (completions worse than their group's mean) are scaled by this
    # before the loss; 1 = plain GRPO, 0 = reinforce only the better half. On a memorised policy
    # the negative half's gradient raised the entropy and undid SFT; 0.1 made GRPO learn on the
    # CPU (docs/training.md, "Does it learn?").
    negative_advantage_weight: float = number(1.0, 0.0, 1.0)
    # GRPO: credit stops at a completion's first token sampled with probability below this (a
    # worse completion is charged up to and including it, a better one credited before it);
    # None = every token (warpk.trainers.grpo.credit_mask; docs/training.md, "Does it learn?")
    credit_cutoff: float | None = number(None, 0.0, 1.0)
    # GRPO's optimizer (SFT always uses AdamW). adamw_torch moves every weight by about the
    # learning rate each step, whatever the size of its gradient; sgd moves each weight in
    # proportion to its gradient. On policy=small neither learned beyond noise: sgd at lr 0.3-1.0
    # collapsed it (docs/training.md, "Does it learn?", 2026-12-03/04).
    optim: str = one_of("adamw_torch", "adamw_torch", "sgd")
    max_prompt_length: int = number(4096, 16, 1_000_000)  # tokens; longer task prompts are left out
    max_length: int = number(2048, 16, 1_000_000)  # SFT: prompt + solution tokens, truncated beyond
    save_steps: int = number(50, 1)  # checkpoint every N steps (and always at the last step)
    save_total_limit: int = number(2, 1, 1000)  # checkpoints kept in <run_dir>/checkpoints
    resume: bool = True  # a restarted run in the same run dir continues from its latest checkpoint
    turn_discount: float = number(0.5, 0.0, 1.0)  # model.turns > 1: credit of turn t scaled by this^t
    samples_per_task: int = number(2, 1, 1024)  # held-out evaluation: k completions per task (pass@k)
    heldout_eval: bool = True  # after training, sample + evaluate the held-out split (records.jsonl)
    # held-out tasks evaluated: 0 = all; N = a fixed sample of N (the same for every run on the suite)
    heldout_tasks: int = number(0, 0, 100_000)
    # Training processes on this node, one per GPU (DDP through accelerate; warpk.trainers.distributed):
    # > 1 runs the stage again under torch.distributed.run. per_device_batch_size is per process.
    processes: int = number(1, 1, 64)


@dataclass
class WorkloadConfig(_Checked):
    """runtime.workload: the requests of an episode (warpk.runtime.serving.workload)."""

    KEY: ClassVar[str] = "runtime.workload"
    arrival_process: str = one_of("bursty", "poisson", "bursty")
    arrival_rate_rps: float = number(3.0, 0.01, 1000.0)  # mean requests per second
    burst_factor: float = number(3.0, 1.0, 100.0)  # bursty: rate inside a burst / mean rate
    burst_fraction: float = number(0.2, 0.0, 0.9)  # bursty: share of time spent in bursts
    burst_mean_s: float = number(20.0, 0.1, 3600.0)  # bursty: mean burst length
    prompt_tokens_mean: float = number(512.0, 1.0, 65536.0)  # lognormal prompt length
    prompt_tokens_sigma: float = number(0.8, 0.0, 3.0)  # lognormal shape of prompt length
    max_prompt_tokens: int = number(4096, 1, 65536)  # longer prompts are truncated
    output_tokens_mean: float = number(256.0, 1.0, 65536.0)  # lognormal output length
    output_tokens_sigma: float = number(0.8, 0.0, 3.0)
    max_output_tokens: int = number(1024, 1, 65536)

    def check(self) -> None:
        if self.arrival_process == "bursty" and self.burst_factor * self.burst_fraction >= 1.0:
            product = self.burst_factor * self.burst_fraction
            raise ConfigError(
                f"runtime.workload.burst_factor * runtime.workload.burst_fraction = {product:g} must be < 1 "
                "(the rate outside bursts would be negative)"
            )


@dataclass
class PpoConfig(_Checked):
    """runtime.ppo: M4's PPO training (warpk.runtime.control.ppo); its other settings are fixed there."""

    KEY: ClassVar[str] = "runtime.ppo"
    timesteps: int = number(100_000, 1, 100_000_000)  # control steps of training
    # copies of the env PPO steps together (one rollout of 480 steps across them): 4 cut the
    # default run from ~3 to ~2 min here but, trained on one seed, missed sla=mixed on 1 of 5
    # seeds where 1 copy met it (docs/runtime.md); 1 until a multi-seed comparison says otherwise
    envs: int = number(1, 1, 64)
    # PPO trained this many times, with seeds seed, seed+1000, ...: each model evaluated on the same
    # held-out episodes, the verdict per training seed and over them (docs/runtime.md, robustness)
    seeds: int = number(1, 1, 100)
    learning_rate: float = number(3e-4, 1e-7, 1.0)
    ent_coef: float = number(0.01, 0.0, 1.0)
    gamma: float = number(0.95, 0.0, 1.0)  # ~20 control periods ahead at 0.95
    n_epochs: int = number(8, 1, 1000)
    # observations and rewards scaled by running statistics while PPO trains (sb3 VecNormalize);
    # stage=runtime only: stage=hrl's M4 and M5 train without it (conf/model/m5.yaml sets false)
    normalize: bool = True


@dataclass
class SelectionConfig(_Checked):
    """runtime.selection: which episodes choose, tune and judge (warpk.runtime.control.seeds)."""

    KEY: ClassVar[str] = "runtime.selection"
    # keep the best of PPO's checkpoints (every 20 rollouts and the last) on this many selection
    # episodes: the cheapest at static max's SLA attainment there, else the most attaining
    # (warpk.runtime.control.selection); 0 = the policy as training ended. stage=runtime only
    select_episodes: int = number(0, 0, 1000)
    tuning_seeds: int = number(3, 1, 1000)  # episodes for the baselines' sweeps (never the eval seeds)
    eval_seeds: int = number(5, 5, 1000)  # held-out episodes every policy is evaluated on
    # heldout: every policy evaluated on the held-out episodes (the claim); tuning: on the tuning
    # episodes instead, for sweeps over the runtime.ppo.* hyper-parameters (docs/runtime.md, "Tuning")
    evaluate_on: str = one_of("heldout", "heldout", "tuning", "validation")
    # the first held-out episode's index in the run seed's held-out family: a claim looks at its
    # episodes once, so the next claim takes the next unused ones (0-19: 2026-12-05's claim and its
    # re-run after the energy fix; 20-39: 2026-12-07's fresh claim)
    heldout_offset: int = number(0, 0, 99_000)


@dataclass
class ActuatorConfig(_Checked):
    """runtime.actuator: the controller's action grid and where its settings go
    (warpk.runtime.serving.env.action_grid, warpk.runtime.serving.actuators)."""

    KEY: ClassVar[str] = "runtime.actuator"
    kind: str = one_of("simulated", "simulated", "nvml")
    nvml_opt_in: bool = False  # kind=nvml changes the GPU's power limit and clocks: say so here
    power_cap_step_w: float = number(100.0, 1.0, 1000.0)  # action grid: caps from max down to min
    sm_clock_max_mhz: float = number(1980.0, 100.0, 5000.0)  # the default (boost) SM clock
    concurrency_choices: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128])

    def check(self) -> None:
        if not self.concurrency_choices or any(
            isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in self.concurrency_choices
        ):
            raise ConfigError(
                f"runtime.actuator.concurrency_choices={self.concurrency_choices!r} is not allowed; "
                "allowed: a non-empty list of integers >= 1"
            )
        if self.kind == "nvml" and not self.nvml_opt_in:
            raise ConfigError(
                "runtime.actuator.kind=nvml changes the GPU's power limit and clocks; "
                "set runtime.actuator.nvml_opt_in=true to allow it (never on a shared GPU)"
            )


@dataclass
class HrlConfig(_Checked):
    """runtime.hrl: M5's rounds (stage=hrl, docs/runtime.md section 8): GRPO round -> PPO round,
    `rounds` times, then a joint PPO round on the final kernel-updated cost model; M4 gets the same
    PPO steps on the unchanged env."""

    KEY: ClassVar[str] = "runtime.hrl"
    rounds: int = number(2, 1, 1000)
    grpo: bool = True  # false: no GRPO rounds, kernels only from runtime.hrl.kernel_records
    grpo_steps: int = number(1, 1, 1_000_000)  # GRPO optimizer steps per round
    ppo_timesteps: int = number(9600, 1, 100_000_000)  # PPO control steps per round
    joint_timesteps: int = number(4800, 0, 100_000_000)  # the last PPO round, final cost model
    kernel_records: str | None = None  # records.jsonl of kernels measured on the served GPU (+ the policy's)


@dataclass
class RuntimeConfig(_Checked):
    """stage=runtime / hrl: the serving environment, M4 PPO and its baselines (issue #6).

    The serving defaults are the fields here, the one place they are set (conf/model/m4.yaml and
    m5.yaml override only what their arm changes); the sections hold the workload, PPO, the
    episodes' selection, the actuator and M5's rounds. Like every group's schema, the sections
    are not frozen dataclasses: OmegaConf makes a frozen dataclass's node read-only, and Hydra
    could then merge neither a preset (m5.yaml's runtime.ppo.normalize) nor an override into it."""

    KEY: ClassVar[str] = "runtime"
    # The served (simulated) GPU: a second instance of the hardware group, selected with
    # `hardware@runtime.served=h100` (conf/config.yaml: h200). Its power-cap range and clock
    # profiles are the controller's actions; the run's own `hardware` may be cpu: nothing here
    # runs on the device unless actuator.kind=nvml.
    served: HardwareConfig = field(default_factory=HardwareConfig)
    # Measured calibration (docs/runtime.md, benchmarks/calibrate_serving.py); a relative path is
    # relative to the repository root.
    calibration: str = "warpk/runtime/serving/data/h200_qwen2.5-7b.json"
    allow_fixture_calibration: bool = False  # tests only: accept a file marked "fixture"
    max_prefill_tokens: int = number(8192, 1, 1_000_000)  # prompt tokens one prefill iteration takes
    # MODELLED clock effect: share of the measured dynamic power that does not scale with the SM
    # clock (e.g. HBM); 0 = the anchors' model, where all of it does (docs/runtime.md, sensitivity).
    fixed_power_share: float = number(0.0, 0.0, 1.0)
    control_period_s: float = number(5.0, 0.1, 600.0)  # one env step = one decision
    episode_steps: int = number(48, 2, 100000)  # 4 simulated minutes per episode, then the queue drains
    sla_penalty: float = number(32.0, 0.0, 1000.0)  # reward cost of a late request, in reference requests
    zeus_eta: float = number(0.5, 0.0, 1.0)  # ZeusCost: eta * energy + (1 - eta) * max power * time
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    ppo: PpoConfig = field(default_factory=PpoConfig)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    actuator: ActuatorConfig = field(default_factory=ActuatorConfig)
    hrl: HrlConfig = field(default_factory=HrlConfig)


# The flat runtime keys before the sections (2026-12-05), for the message that names the new one.
RUNTIME_RENAMED = {
    **{f"runtime.{k}": f"runtime.workload.{k}" for k in (
        "arrival_process", "arrival_rate_rps", "burst_factor", "burst_fraction", "burst_mean_s",
        "prompt_tokens_mean", "prompt_tokens_sigma", "max_prompt_tokens", "output_tokens_mean",
        "output_tokens_sigma", "max_output_tokens")},
    **{f"runtime.ppo_{k}": f"runtime.ppo.{k}" for k in (
        "timesteps", "envs", "seeds", "learning_rate", "ent_coef", "gamma", "n_epochs", "normalize")},
    "runtime.ppo_select_episodes": "runtime.selection.select_episodes",
    **{f"runtime.{k}": f"runtime.selection.{k}" for k in ("tuning_seeds", "eval_seeds", "evaluate_on")},
    "runtime.actuator": "runtime.actuator.kind",
    **{f"runtime.{k}": f"runtime.actuator.{k}" for k in (
        "nvml_opt_in", "power_cap_step_w", "sm_clock_max_mhz", "concurrency_choices")},
    **{f"runtime.hrl_{k}": f"runtime.hrl.{k}" for k in (
        "rounds", "grpo", "grpo_steps", "ppo_timesteps", "joint_timesteps")},
    "runtime.kernel_records": "runtime.hrl.kernel_records",
}  # fmt: skip


@dataclass
class ReportConfig(_Checked):
    """stage=report: statistics, figures and tables from run dirs (issue #8)."""

    KEY: ClassVar[str] = "report"
    # An arm is what ran (warpk.report.runs.what_ran: train/m1, evaluate/reference, ...) followed by
    # the values of these config keys, e.g. [reward.ipw_blend] -> train/m3/0.25
    arm_keys: list[str] = field(default_factory=list)
    # the arm others are tested against; None = evaluate/reference when it ran, else the first in sort order
    baseline_arm: str | None = None
    confidence: float = number(0.95, 0.5, 0.999)  # of every interval
    alpha: float = number(0.05, 0.0001, 0.5)  # Holm-adjusted p below this counts as significant
    bootstrap_samples: int = number(10000, 100, 1000000)  # resamples of tasks
    bootstrap_method: str = one_of("percentile", "percentile", "basic", "bca")
    matched_runtime_tolerance: float = number(0.03, 0.0, 0.5)  # |runtime diff| / baseline runtime
    allow_modelled_energy_compare: bool = False  # compare measured with modelled energy (labelled)
    figures: bool = True  # write PNG figures (matplotlib, Agg)
