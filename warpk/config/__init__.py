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
from dataclasses import dataclass, field
from typing import Any

from warpk.config.checked import ConfigError, _Checked, describe_allowed, number, one_of
from warpk.config.groups import (
    ARMS,
    TRAINER_STAGE,
    ClockProfile,
    EvaluateConfig,
    HardwareConfig,
    LoggerConfig,
    ModelConfig,
    PolicyConfig,
    RewardConfig,
    SlaConfig,
    TasksConfig,
)
from warpk.config.stage_groups import (
    RUNTIME_RENAMED,
    ActuatorConfig,
    HrlConfig,
    PpoConfig,
    ReportConfig,
    RuntimeConfig,
    SelectionConfig,
    TrainConfig,
    WorkloadConfig,
)

__all__ = [
    "ARMS", "RUNTIME_RENAMED", "STAGES", "STAGE_ARMS", "TRAINER_STAGE", "ActuatorConfig", "ClockProfile",
    "ConfigError", "EvaluateConfig", "HardwareConfig", "HrlConfig", "LoggerConfig", "ModelConfig",
    "PolicyConfig", "PpoConfig", "ReportConfig", "RewardConfig", "RunConfig", "RuntimeConfig",
    "SelectionConfig", "SlaConfig", "TasksConfig", "TrainConfig", "WorkloadConfig", "describe_allowed",
    "field_at", "number", "one_of", "register_configs",
]  # fmt: skip

STAGES = ("evaluate", "train", "runtime", "hrl", "report")
STAGE_ARMS = {"train": "m0|m1|m2|m3", "runtime": "m4", "hrl": "m5"}  # the arms of the training stages


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
        ppo, sel = rt.ppo, rt.selection
        if self.stage == "hrl" and (ppo.seeds > 1 or ppo.envs > 1 or sel.evaluate_on != "heldout"
                                    or ppo.normalize or sel.select_episodes):
            raise ConfigError(
                f"stage=hrl trains one PPO model per arm on one env and reports on the held-out episodes: "
                f"runtime.ppo.seeds={ppo.seeds}, runtime.ppo.envs={ppo.envs}, "
                f"runtime.selection.evaluate_on={sel.evaluate_on}, "
                f"runtime.ppo.normalize={str(ppo.normalize).lower()}, "
                f"runtime.selection.select_episodes={sel.select_episodes} are stage=runtime's (model=m4); "
                "allowed here: 1, 1, heldout, false, 0"
            )
        nvml = self.stage == "runtime" and rt.actuator.kind == "nvml"  # stage=hrl has no actuator
        if nvml and self.hardware.name != served.name:
            raise ConfigError(
                f"runtime.actuator.kind=nvml needs hardware={served.name} (hardware@runtime.served, the "
                f"simulated GPU), got hardware={self.hardware.name}: the settings PPO learned are that GPU's"
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
