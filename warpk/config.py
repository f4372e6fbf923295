"""Typed configuration: one schema dataclass per config group, checked on construction.

Hydra composes YAML from `conf/` onto these schemas (registered by `register_configs()`), so a
wrong type fails at composition; `OmegaConf.to_object` then builds the dataclasses and each
`__post_init__` checks ranges and choices. Below `warpk/__main__.py` code only sees these plain
objects, never a DictConfig.

Fields declare their allowed values with `number(...)` and `one_of(...)`; the same metadata
writes the error message, so a bad override always names the key and what is allowed.

Non-goals: no YAML loading here (that is Hydra's job at the front door), no defaults that
silently repair a bad value.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

STAGES = ("evaluate", "train", "runtime", "hrl", "report")
ARMS = ("m0", "m1", "m2", "m3", "m4", "m5")
# the stage each trainer runs in; stage=evaluate and stage=report take any arm (or none)
TRAINER_STAGE = {"none": "evaluate", "sft": "train", "grpo": "train", "ppo": "runtime", "hrl": "hrl"}
STAGE_ARMS = {"train": "m0|m1|m2|m3", "runtime": "m4", "hrl": "m5"}  # the arms of the training stages


class ConfigError(ValueError):
    """A config value outside what is allowed; the message names the key and the allowed values."""


def number(default: float | int | None, lo: float | None = None, hi: float | None = None) -> Any:
    """A numeric field allowed in [lo, hi] (either bound may be open-ended with None)."""
    return field(default=default, metadata={"range": (lo, hi)})


def one_of(default: str, *choices: str) -> Any:
    """A string field restricted to `choices`."""
    return field(default=default, metadata={"choices": choices})


def describe_allowed(f: dataclasses.Field) -> str:
    """Human text for what a field accepts, e.g. 'a number in [0, 1]' or 'one of a, b'."""
    if "choices" in f.metadata:
        return "one of " + ", ".join(f.metadata["choices"])
    kind = "an integer" if "int" in str(f.type) else "a number"
    lo, hi = f.metadata.get("range", (None, None))
    if lo is not None and hi is not None:
        return f"{kind} in [{lo:g}, {hi:g}]"
    if lo is not None:
        return f"{kind} >= {lo:g}"
    if hi is not None:
        return f"{kind} <= {hi:g}"
    return kind


def _fail(key: str, value: Any, f: dataclasses.Field) -> None:
    raise ConfigError(f"{key}={value!r} is not allowed; allowed: {describe_allowed(f)}")


class _Checked:
    """Mixin: checks every `number`/`one_of` field of a schema in `__post_init__`."""

    KEY: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            key = f"{self.KEY}.{f.name}" if self.KEY else f.name
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                _fail(key, value, f)
            if "range" in f.metadata and value is not None:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    _fail(key, value, f)
                lo, hi = f.metadata["range"]
                if (lo is not None and value < lo) or (hi is not None and value > hi):
                    _fail(key, value, f)
        self.check()

    def check(self) -> None:
        """Cross-field checks of one schema; override where fields constrain each other."""


@dataclass
class ModelConfig(_Checked):
    """The experiment arm (M0-M5, or none: evaluate what is given): which trainer runs. Each preset
    in conf/model/ also sets the global `stage` its trainer runs in (TRAINER_STAGE)."""

    KEY: ClassVar[str] = "model"
    name: str = one_of("none", "none", *ARMS)
    title: str = ""
    trainer: str = one_of("none", *TRAINER_STAGE)
    turns: int = number(1, 1, 16)  # GRPO multi-turn refinement: the evaluator's record is fed back


@dataclass
class PolicyConfig(_Checked):
    """The kernel-writing LLM: a Hugging Face causal LM with LoRA, or `tiny` built in-process."""

    KEY: ClassVar[str] = "policy"
    name: str = one_of("tiny", "tiny", "small", "qwen2.5-coder-1.5b", "qwen2.5-coder-7b")
    hf_id: str | None = None  # None: built locally (tiny, small), no download
    hidden_size: int | None = number(None, 8, 65536)  # tiny and small only
    num_hidden_layers: int | None = number(None, 1, 256)  # tiny and small only
    # lora: train a LoRA adapter on target_modules (the base stays frozen); full: train every
    # parameter (small: a model of ~1M parameters, where LoRA on attention alone cannot learn)
    finetune: str = one_of("lora", "lora", "full")
    lora_r: int = number(16, 1, 1024)
    lora_alpha: int = number(32, 1, 4096)
    lora_dropout: float = number(0.05, 0.0, 0.9)
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    max_new_tokens: int = number(1024, 1, 32768)
    temperature: float = number(0.8, 0.0, 5.0)
    checkpoint: str | None = None  # a trained LoRA adapter dir (stage=evaluate samples from it)
    # GRPO's generation (docs/training.md): hf = transformers' generate, dynamic KV cache, eager;
    # hf-static = a static KV cache with the decode step compiled by torch.compile; hf-paged =
    # transformers' continuous batching over a paged KV cache; vllm = vLLM colocated in each
    # training process through trl (a GPU and the vllm package, which is not installed with warpk)
    generator: str = one_of("hf", "hf", "hf-static", "hf-paged", "vllm")
    # hf and hf-static on a bf16/fp16 policy: sample with the LoRA adapters cast to the base's dtype
    # and without a host sync per token (warpk.trainers.lean_sampling); false = transformers as is
    lean_sampling: bool = True


@dataclass
class RewardConfig(_Checked):
    """Weights of the dimensionless reward terms (DESIGN.md 4.4) and the failure tiers."""

    KEY: ClassVar[str] = "reward"
    name: str = one_of("kernel", "kernel", "energy", "ipw_blend", "hrl")
    alpha_speedup: float = number(1.0, 0.0, 100.0)  # weight of ln(speedup)
    beta_energy: float = number(0.0, 0.0, 100.0)  # weight of ln(ref_energy / energy)
    delta_power: float = number(0.0, 0.0, 100.0)  # weight of 1 - power / ref_power
    gamma_sla: float = number(0.0, 0.0, 100.0)  # weight of the SLA violation
    ipw_blend: float = number(0.0, 0.0, 1.0)  # M3 weight of ln(ipw / ref_ipw) of the served model
    # MODELLED, not measured: the share of a served step's time (and energy) the kernel's op takes
    # at the reference. The IPW term scales the kernel's measured power ratio by the op's share of
    # the new step's time; 0 -> the term is 0, 1 -> ln(ref_power / power). No measured file splits a
    # served step by op (warpk/runtime/data/*.json times whole steps); 0.5 is the share at which the
    # term depends most on the kernel's runtime (docs/rewards.md, "IPW").
    ipw_op_share: float = number(0.5, 0.0, 1.0)
    reward_no_code: float = number(-1.0, -100.0, 0.0)
    reward_compile_error: float = number(-0.75, -100.0, 0.0)
    reward_incorrect: float = number(-0.5, -100.0, 0.0)

    def check(self) -> None:
        if not self.reward_no_code <= self.reward_compile_error <= self.reward_incorrect:
            raise ConfigError(
                "reward failure tiers must satisfy reward_no_code <= reward_compile_error <= "
                f"reward_incorrect; got {self.reward_no_code}, {self.reward_compile_error}, "
                f"{self.reward_incorrect}"
            )


@dataclass
class ClockProfile:
    """A named SM/memory clock setting; None means the driver's default (boost) clock."""

    name: str = "default"
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None


@dataclass
class HardwareConfig(_Checked):
    """Datasheet profile of the device: roofline ceilings and the power model's parameters."""

    KEY: ClassVar[str] = "hardware"
    name: str = one_of("auto", "auto", "h100", "h200", "cpu")
    device: str = one_of("cpu", "cpu", "cuda")
    gpu_name: str | None = None  # substring of the NVML device name, e.g. "H200"
    peak_bf16_tflops: float | None = number(None, 0.0)
    peak_fp32_tflops: float | None = number(None, 0.0)
    mem_bandwidth_gb_s: float | None = number(None, 0.0)
    tdp_w: float | None = number(None, 1.0)
    idle_power_w: float | None = number(None, 0.0)
    power_cap_min_w: float | None = number(None, 0.0)
    power_cap_max_w: float | None = number(None, 0.0)
    cores: int | None = number(None, 1)  # CPU cores (cpu profile) the power model scales by
    clock_profiles: list[ClockProfile] = field(default_factory=list)
    min_energy_window_s: float | None = number(None, 0.0)
    # nvml energy: stop measuring once both sides' stated uncertainty is within this share of
    # their energy (from the second round; evaluate.energy_repeats rounds at most); 0: always the cap
    energy_rel_uncertainty: float = number(0.01, 0.0, 1.0)
    cuda_arch: str | None = None  # TORCH_CUDA_ARCH_LIST for CUDA builds, e.g. "9.0" on Hopper
    source: str = ""  # where the numbers come from

    def check(self) -> None:
        if self.name == "auto":
            return
        required = [
            "peak_bf16_tflops",
            "peak_fp32_tflops",
            "mem_bandwidth_gb_s",
            "tdp_w",
            "idle_power_w",
            "min_energy_window_s",
        ]
        missing = [k for k in required if getattr(self, k) is None]
        if missing:
            raise ConfigError(f"hardware={self.name} lacks {', '.join(missing)}")
        if self.idle_power_w >= self.tdp_w:
            raise ConfigError(f"hardware.idle_power_w={self.idle_power_w} must be < tdp_w={self.tdp_w}")
        if self.power_cap_min_w is not None and self.power_cap_max_w is not None:
            if not self.power_cap_min_w <= self.power_cap_max_w:
                raise ConfigError("hardware.power_cap_min_w must be <= power_cap_max_w")


@dataclass
class SlaConfig(_Checked):
    """Latency service-level objective of the serving workload."""

    KEY: ClassVar[str] = "sla"
    name: str = one_of("mixed", "latency_sensitive", "throughput", "mixed")
    ttft_p95_s: float = number(2.0, 0.001, 3600.0)
    e2e_p95_s: float = number(30.0, 0.001, 3600.0)

    def check(self) -> None:
        if self.ttft_p95_s > self.e2e_p95_s:
            raise ConfigError(f"sla.ttft_p95_s={self.ttft_p95_s} must be <= sla.e2e_p95_s={self.e2e_p95_s}")


@dataclass
class TasksConfig(_Checked):
    """Which KernelBench-format tasks to use."""

    KEY: ClassVar[str] = "tasks"
    source: str = one_of("bundled", "bundled", "kernelbench")
    root: str | None = None  # bundled: the repo's kernelbench/; kernelbench: an upstream checkout
    level: int | None = number(None, 1, 3)
    split: str = one_of("all", "train", "heldout", "all")
    subset: list[str] = field(default_factory=list)  # task names; empty = all
    shape: str = one_of("auto", "auto", "cpu", "gpu")  # auto: cpu shapes on cpu hardware


@dataclass
class LoggerConfig(_Checked):
    """Weights & Biases: offline by default (no key, no network)."""

    KEY: ClassVar[str] = "logger"
    mode: str = one_of("offline", "offline", "online", "disabled")
    project: str = "warpk"
    entity: str | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class EvaluateConfig(_Checked):
    """Protocol of the evaluator: correctness trials, timing, sandbox limits, caches."""

    KEY: ClassVar[str] = "evaluate"
    task_file: str | None = None  # evaluate these files instead of the `tasks` suite
    candidate_files: list[str] = field(default_factory=list)
    candidates_dir: str | None = None  # tasks=kernelbench: DIR/<task name>/*.py or DIR/<task name>.py
    correctness_trials: int = number(5, 1, 100)
    timing_batches: int = number(10, 2, 10000)  # timed batches each of reference and candidate
    batch_target_ms: float = number(20.0, 0.1, 60000.0)  # a batch of reference calls lasts >= this
    batch_memory_gb: float = number(1.0, 0.001, 4096.0)  # inputs + outputs of one batch at most
    num_threads: int = number(1, 1, 1024)  # torch CPU threads in the worker
    compile_timeout_s: float = number(600.0, 1.0, 86400.0)  # loading/building one candidate
    run_timeout_s: float = number(10.0, 0.1, 86400.0)  # floor of every run step's limit
    run_timeout_factor: float = number(20.0, 1.0, 1e6)  # + this x the reference's time for the step
    memory_limit_gb: float = number(0.0, 0.0, 4096.0)  # host RSS of a candidate; 0 = half the RAM
    sandbox: str = one_of("auto", "auto", "bwrap", "process")  # auto: bwrap, or refuse to run
    compile_workers: int = number(0, 0, 512)  # parallel CUDA builds; 0 = min(free cores, RAM/8 GB)
    gpus: list[int] = field(default_factory=list)  # measuring lanes; empty = every visible GPU
    cache_dir: str | None = None  # builds and results; None = $WARPK_CACHE_DIR or ~/.cache/warpk
    result_cache: bool = True  # reuse the record of an identical (task, candidate, hardware, protocol)
    tolerance_fp32: float = number(1e-4, 0.0, 1.0)  # atol = rtol for float32 outputs
    tolerance_low_precision: float = number(1e-2, 0.0, 1.0)  # atol = rtol for fp16 / bf16
    # Energy per call: nvml = measured on the GPU's NVML counter (docs/energy.md); sampler = the
    # same counter streamed by the sampler daemon at sampler_addr, with the lane's power, clocks,
    # temperature and throttling during each candidate's measurement in its record; model = power
    # model x runtime; none = not measured. auto = sampler on a cuda device when a daemon there
    # serves every GPU, else nvml; model on the CPU.
    energy: str = one_of("auto", "auto", "nvml", "sampler", "model", "none")
    sampler_addr: str = "127.0.0.1:50052"  # `python -m sampler serve --addr ...`, same host
    energy_repeats: int = number(3, 1, 100)  # nvml: rounds (an aligned window of each) at most

    def memory_limit(self) -> float:
        """GB of host memory one candidate's processes may hold (0 = half of this host's RAM)."""
        if self.memory_limit_gb:
            return self.memory_limit_gb
        pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return round(pages / 1024**3 / 2, 1)

    def check(self) -> None:
        if self.candidate_files and not self.task_file:
            raise ConfigError("evaluate.candidate_files needs evaluate.task_file (the task they solve)")
        if not _loopback_port(self.sampler_addr):
            raise ConfigError(
                f"evaluate.sampler_addr={self.sampler_addr!r} must be host:port on this machine "
                "(127.0.0.1, [::1] or localhost): the daemon's timestamps are this host's clock"
            )


def _loopback_port(addr: str) -> bool:
    """host:port with a loopback host (127.0.0.0/8, ::1, localhost) and a port number."""
    from sampler.addr import is_loopback

    port = addr.rpartition(":")[2]
    return port.isdigit() and 0 < int(port) < 65536 and is_loopback(addr)


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
    # Training processes on this node, one per GPU (DDP through accelerate; warpk.trainers.distributed):
    # > 1 runs the stage again under torch.distributed.run. per_device_batch_size is per process.
    processes: int = number(1, 1, 64)


@dataclass
class RuntimeConfig(_Checked):
    """stage=runtime / hrl: the serving environment, M4 PPO and its baselines (issue #6)."""

    KEY: ClassVar[str] = "runtime"
    # The served (simulated) GPU: a second instance of the hardware group, selected with
    # `hardware@runtime.served=h100` (conf/config.yaml: h200). Its power-cap range and clock
    # profiles are the controller's actions; the run's own `hardware` may be cpu: nothing here
    # runs on the device unless actuator=nvml.
    served: HardwareConfig = field(default_factory=HardwareConfig)
    # Measured calibration (docs/runtime.md); a relative path is relative to the repository root.
    calibration: str = "warpk/runtime/data/h200_qwen2.5-7b.json"
    allow_fixture_calibration: bool = False  # tests only: accept a file marked "fixture"
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
    max_prefill_tokens: int = number(8192, 1, 1_000_000)  # prompt tokens one prefill iteration takes
    concurrency_choices: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128])
    power_cap_step_w: float = number(100.0, 1.0, 1000.0)  # action grid: caps from max down to min
    sm_clock_max_mhz: float = number(1980.0, 100.0, 5000.0)  # the default (boost) SM clock
    # MODELLED clock effect: share of the measured dynamic power that does not scale with the SM
    # clock (e.g. HBM); 0 = the anchors' model, where all of it does (docs/runtime.md, sensitivity).
    fixed_power_share: float = number(0.0, 0.0, 1.0)
    control_period_s: float = number(5.0, 0.1, 600.0)  # one env step = one decision
    episode_steps: int = number(48, 2, 100000)
    sla_penalty: float = number(32.0, 0.0, 1000.0)  # reward cost of a late request, in reference requests
    ppo_timesteps: int = number(100_000, 1, 100_000_000)
    # copies of the env PPO steps together (one rollout of 480 steps across them): 4 cut the
    # default run from ~3 to ~2 min here but, trained on one seed, missed sla=mixed on 1 of 5
    # seeds where 1 copy met it (docs/runtime.md); 1 until a multi-seed comparison says otherwise
    ppo_envs: int = number(1, 1, 64)
    # PPO trained this many times, with seeds seed, seed+1000, ...: each model evaluated on the same
    # held-out episodes, the verdict per training seed and over them (docs/runtime.md, robustness)
    ppo_seeds: int = number(1, 1, 100)
    tuning_seeds: int = number(3, 1, 1000)  # episodes for the baselines' sweeps (never the eval seeds)
    eval_seeds: int = number(5, 5, 1000)  # held-out episodes every policy is evaluated on
    # heldout: every policy evaluated on the held-out episodes (the claim); tuning: on the tuning
    # episodes instead, for sweeps over the ppo_* hyper-parameters (docs/runtime.md, "Tuning")
    evaluate_on: str = one_of("heldout", "heldout", "tuning")
    # PPO's hyper-parameters (warpk.runtime.ppo); the rest of its settings are fixed there
    ppo_learning_rate: float = number(3e-4, 1e-7, 1.0)
    ppo_ent_coef: float = number(0.01, 0.0, 1.0)
    ppo_gamma: float = number(0.95, 0.0, 1.0)  # ~20 control periods ahead at 0.95
    ppo_n_epochs: int = number(8, 1, 1000)
    zeus_eta: float = number(0.5, 0.0, 1.0)  # ZeusCost: eta * energy + (1 - eta) * max power * time
    actuator: str = one_of("simulated", "simulated", "nvml")
    nvml_opt_in: bool = False  # actuator=nvml changes the GPU's power limit and clocks: say so here
    # stage=hrl (M5, docs/runtime.md section 8): GRPO round -> PPO round, hrl_rounds times, then a
    # joint PPO round on the final kernel-updated cost model; M4 gets the same PPO steps, unchanged env.
    hrl_rounds: int = number(2, 1, 1000)
    hrl_grpo: bool = True  # false: no GRPO rounds, kernels only from runtime.kernel_records
    hrl_grpo_steps: int = number(1, 1, 1_000_000)  # GRPO optimizer steps per round
    hrl_ppo_timesteps: int = number(9600, 1, 100_000_000)  # PPO control steps per round
    hrl_joint_timesteps: int = number(4800, 0, 100_000_000)  # the last PPO round, final cost model
    kernel_records: str | None = None  # records.jsonl of kernels measured on the served GPU (+ the policy's)
    # A kernel is deployed only when its speedup interval (speedup_low) is above 1; a record without
    # an interval (written before evaluator v2) needs speedup > 1 + this margin instead
    deploy_margin: float = number(0.03, 0.0, 1.0)

    def check(self) -> None:
        if not self.concurrency_choices or any(
            isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in self.concurrency_choices
        ):
            raise ConfigError(
                f"runtime.concurrency_choices={self.concurrency_choices!r} is not allowed; "
                "allowed: a non-empty list of integers >= 1"
            )
        if self.arrival_process == "bursty" and self.burst_factor * self.burst_fraction >= 1.0:
            product = self.burst_factor * self.burst_fraction
            raise ConfigError(
                f"runtime.burst_factor * runtime.burst_fraction = {product:g} must be < 1 "
                "(the rate outside bursts would be negative)"
            )
        if self.actuator == "nvml" and not self.nvml_opt_in:
            raise ConfigError(
                "runtime.actuator=nvml changes the GPU's power limit and clocks; "
                "set runtime.nvml_opt_in=true to allow it (never on a shared GPU)"
            )


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


@dataclass
class RunConfig(_Checked):
    """The whole run: the stage to execute and every group's settings."""

    stage: str = one_of("evaluate", *STAGES)
    seed: int = number(0, 0)
    model: ModelConfig = field(default_factory=ModelConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    sla: SlaConfig = field(default_factory=SlaConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    results: str | None = None  # stage=report: a run dir, a sweep dir or a glob of them

    def check(self) -> None:
        own = TRAINER_STAGE[self.model.trainer]
        if self.stage in STAGE_ARMS and own != self.stage:
            raise ConfigError(
                f"stage={self.stage} needs model={STAGE_ARMS[self.stage]}; model={self.model.name} runs "
                f"stage={own}: give the arm (it picks its stage) and drop stage={self.stage}"
            )
        t = self.train
        batch = t.per_device_batch_size * t.gradient_accumulation_steps * t.processes
        if self.model.trainer in ("grpo", "hrl") and self.stage == own and batch % t.num_generations:
            raise ConfigError(
                f"train.per_device_batch_size x train.gradient_accumulation_steps x train.processes = "
                f"{batch} must be a multiple of train.num_generations={t.num_generations} (GRPO groups)"
            )
        if self.stage == "train" and self.model.turns > 1 and self.policy.generator == "vllm":
            raise ConfigError(
                f"model.turns={self.model.turns} with policy.generator=vllm is not allowed: the "
                "refinement turns are sampled with HF generate; use policy.generator=hf or model.turns=1"
            )
        if self.stage in ("runtime", "hrl"):
            self._check_runtime()

    def _check_runtime(self) -> None:
        """The controller's rules (stage=runtime, hrl): its reward weighs energy or SLA, and an
        NVML actuator drives the GPU it was simulated on."""
        r = self.reward
        if r.beta_energy == 0 and r.gamma_sla == 0:
            raise ConfigError(
                f"stage={self.stage} trains the controller on reward.beta_energy (energy) and "
                f"reward.gamma_sla (SLA), both 0 in reward={r.name}; use model=m4 (reward=hrl) or set them"
            )
        served = self.runtime.served
        if served.power_cap_min_w is None or served.power_cap_max_w is None or not served.clock_profiles:
            raise ConfigError(
                f"stage={self.stage} serves on hardware@runtime.served={served.name}, which has no power-cap "
                "range or clock profiles to control; allowed: hardware@runtime.served=h200 or h100"
            )
        rt = self.runtime
        if self.stage == "hrl" and (rt.ppo_seeds > 1 or rt.ppo_envs > 1 or rt.evaluate_on != "heldout"):
            raise ConfigError(
                f"stage=hrl trains one PPO model per arm on one env and reports on the held-out episodes: "
                f"runtime.ppo_seeds={rt.ppo_seeds}, ppo_envs={rt.ppo_envs}, evaluate_on={rt.evaluate_on} "
                "are stage=runtime's (model=m4); allowed here: 1, 1, heldout"
            )
        nvml = self.stage == "runtime" and self.runtime.actuator == "nvml"  # stage=hrl has no actuator
        if nvml and self.hardware.name != served.name:
            raise ConfigError(
                f"runtime.actuator=nvml needs hardware={served.name} (hardware@runtime.served, the simulated "
                f"GPU), got hardware={self.hardware.name}: the settings PPO learned are that GPU's"
            )


def field_at(key: str) -> dataclasses.Field | None:
    """The schema field at a dotted key such as 'reward.ipw_blend', or None if there is none."""
    cls: Any = RunConfig
    found = None
    for part in key.split("."):
        fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
        found = fields.get(part)
        if found is None:
            return None
        cls = found.default_factory() if found.default_factory is not dataclasses.MISSING else None
    return found


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore as `run_schema` (conf/config.yaml extends it)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="run_schema", node=RunConfig)
