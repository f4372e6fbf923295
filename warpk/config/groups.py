"""The schemas of the groups every stage reads: model, policy, reward, hardware, sla, tasks,
logger, evaluate (warpk.config re-exports them)."""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from typing import ClassVar

from warpk.config.checked import ConfigError, _Checked, number, one_of

ARMS = ("m0", "m1", "m2", "m3", "m4", "m5")
# the stage each trainer runs in; stage=evaluate and stage=report take any arm (or none)
TRAINER_STAGE = {"none": "evaluate", "sft": "train", "grpo": "train", "ppo": "runtime", "hrl": "hrl"}


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
    # served step by op (warpk/runtime/serving/data/*.json times whole steps); 0.5 is the share at which the
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
    source: str = one_of("bundled", "bundled", "kernelbench", "synthetic")
    # bundled: the repo's kernelbench/; kernelbench: an upstream checkout; synthetic: where the
    # generated folders go (None: $WARPK_CACHE_DIR/synthetic or ~/.cache/warpk/synthetic)
    root: str | None = None
    level: int | None = number(None, 1, 3)
    split: str = one_of("all", "train", "heldout", "heldout_pair", "all")
    subset: list[str] = field(default_factory=list)  # task names; empty = all
    shape: str = one_of("auto", "auto", "cpu", "gpu")  # auto: cpu shapes on cpu hardware
    # tasks=synthetic only (warpk.synthetic): the generator's seed, tasks kept, ops per chain,
    # op or group names (empty = all), the held-out share by composition, op pairs held out
    seed: int = number(0, 0, None)
    size: int = number(1000, 1, 100_000)
    max_ops: int = number(5, 1, 8)
    vocabulary: list[str] = field(default_factory=list)
    heldout_share: float = number(0.2, 0.0, 0.9)
    heldout_pairs: int = number(24, 0, 200)

    SYNTHETIC_ONLY: ClassVar[tuple[str, ...]] = ("seed", "size", "max_ops", "vocabulary", "heldout_share",
                                                 "heldout_pairs")

    def check(self) -> None:
        if self.source == "synthetic":
            if self.level is not None:
                raise ConfigError("tasks.level is upstream KernelBench's (tasks=kernelbench); "
                                  "tasks=synthetic has none: drop it")
            return
        defaults = {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
                    for f in fields(self)}
        changed = [k for k in self.SYNTHETIC_ONLY if getattr(self, k) != defaults[k]]
        if changed:
            raise ConfigError(f"tasks.{', tasks.'.join(changed)} apply to tasks=synthetic only, not "
                              f"tasks={self.source}: drop them or use tasks=synthetic")


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
    timing_batches: int = number(12, 3, 10000)  # timed batches each side, in pairs (odd: one more)
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
