"""The front door: `python -m warpk [overrides]`. The only module that sees Hydra or OmegaConf.

1. Preflight: before Hydra launches anything, every job's config (each point of a `-m` sweep
   too) is composed and converted to the typed `RunConfig`, so a bad override fails here, on the
   login node, with the key and the allowed values, never inside a queued job.
2. Hydra composes the job's config; `to_run_config` turns it into plain dataclasses; with
   `hardware=auto`, `compose_job` composes it again with `hardware=<profile>` of the GPU NVML
   reports (on the node the job runs on).
3. The job writes, under its Hydra output dir: resolved_config.yaml, the W&B run, what the stage
   writes (records.jsonl for evaluate) and summary.json.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import random
import re
import sys
from pathlib import Path
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import MissingConfigException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from warpk.config import (
    RUNTIME_RENAMED,
    ConfigError,
    HardwareConfig,
    RunConfig,
    describe_allowed,
    field_at,
    register_configs,
)
from warpk.evaluator.errors import HarnessFailure
from warpk.evaluator.sandbox import SandboxUnavailable, resolve_sandbox
from warpk.hardware import (
    HardwareError,
    detect_gpu_names,
    profile_for,
    require_device,
    require_generator,
    require_processes,
    resolve_energy,
)
from warpk.paths import CONF_DIR
from warpk.policy.load import PolicyWeightsMissing, require_weights
from warpk.provenance import git_head
from warpk.requeue import tolerate_requeue_kill
from warpk.runtime.serving.calibration import CalibrationError
from warpk.stages import StageUnavailable, check_available, objective, run_stage
from warpk.tasks import TaskError, synthetic_settings
from warpk.tracking import require_wandb, wandb_run
from warpk.trainers import distributed
from warpk.trainers.checkpoints import CheckpointMismatch, check_checkpoint
from warpk.trainers.common import cache_dir

EVALUATING_STAGES = ("evaluate", "train", "hrl")  # stages that run candidates in the sandbox

MAX_PREFLIGHT_JOBS = 4096
log = logging.getLogger("warpk")

register_configs()


def to_run_config(cfg: DictConfig) -> RunConfig:
    """Typed config of one composed job (no `hydra` node); a bad value is one ConfigError line."""
    try:
        return OmegaConf.to_object(cfg)
    except OmegaConfBaseException as err:
        raise ConfigError(_explain(err)) from err


def compose_job(compose_fn, overrides: list[str], gpu_names: list[str] | None = None) -> RunConfig:
    """The typed config of the job `overrides` describe, composed by `compose_fn(overrides)`
    (Hydra's compose API). `hardware=auto` is resolved into an override before composition:
    this node's GPU names (`gpu_names`, None: ask NVML) pick the profile, and the job is composed
    again with `hardware=<profile>`, so Hydra alone reads conf/. On SLURM this runs in the job,
    on the compute node whose GPU it is."""
    run = to_run_config(compose_fn(list(overrides)))
    if run.hardware.name != "auto":
        return run
    if run.hardware != HardwareConfig():
        raise ConfigError(
            "hardware.* overrides need an explicit profile, e.g. hardware=h100 hardware.tdp_w=600"
        )
    profile = profile_for(detect_gpu_names() if gpu_names is None else gpu_names)
    kept = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] != "hardware"]
    return to_run_config(compose_fn([*kept, f"hardware={profile}"]))


def compose_config(overrides: list[str], gpu_names: list[str] | None = None) -> RunConfig:
    """A job's typed config composed from conf/ outside a Hydra app (tests, benchmarks)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="warpk"):
        return compose_job(lambda ov: compose("config", overrides=ov), list(overrides), gpu_names)


RENAMED = {  # old key -> what replaced it
    "runtime.gpu": "use hardware@runtime.served (h200 | h100)",
    "runtime.deploy_margin": "M5 deploys by the evaluator's one rule of faster (records.faster: speedup_low "
                             "> 1 + records.SPEED_BIAS_MARGIN), with nothing to set",
    **{old: f"use {new}" for old, new in RUNTIME_RENAMED.items()},  # runtime's sections, 2026-12-05
}


def _explain(err: BaseException) -> str:
    """One line for a composition error: the key, the bad value and what is allowed."""
    if isinstance(err, MissingConfigException) and err.options and err.missing_cfg_file:
        group, _, option = err.missing_cfg_file.rpartition("/")
        return f"{group}={option} is not an option; allowed: {', '.join(err.options)}"
    cause = err
    while cause.__cause__ is not None and not isinstance(cause, ConfigError):
        cause = cause.__cause__
    if isinstance(cause, ConfigError):
        return str(cause)
    unknown = re.search(r"Could not override '([^']+)'", str(err))
    key = getattr(cause, "full_key", None) or (unknown.group(1) if unknown else None)
    if key in RENAMED:  # an old key, or an old value key that is a section now (runtime.actuator)
        return f"{key} is no longer a key: {RENAMED[key]}"
    field = field_at(key) if key else None
    if field is not None:
        value = getattr(cause, "value", None)
        return f"{key}={value!r} is not allowed; allowed: {describe_allowed(field)}"
    if unknown:
        return f"{unknown.group(1)} is not a config key (`python -m warpk --cfg job` lists them)"
    return " ".join(str(err).split())


def _job_overrides(argv: list[str]) -> tuple[list[str], bool] | None:
    """The config overrides in argv and whether it is a multirun; None leaves argv to Hydra."""
    overrides, multirun, args = [], False, iter(argv)
    for arg in args:
        if arg in ("-m", "--multirun"):
            multirun = True
        elif arg in ("-c", "--cfg", "-p", "--package"):
            next(args, None)
        elif arg.startswith("-"):
            return None  # --help, --info, --config-dir ...: Hydra's own business
        elif not arg.lstrip("+~").startswith("hydra"):
            overrides.append(arg)
    return overrides, multirun


def preflight(argv: list[str], gpu_names: list[str] | None = None) -> str | None:
    """Compose and check every job `argv` would launch; the first error's text, or None."""
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed_argv = _job_overrides(argv)
    if parsed_argv is None:
        return None
    overrides, multirun = parsed_argv
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        axes = []
        for o in parsed:
            key = o.get_key_element()
            values = list(o.sweep_string_iterator()) if multirun and o.is_sweep_override() else [None]
            axes.append([f"{key}={v}" for v in values] if values != [None] else [o.input_line])
    except Exception as err:  # noqa: BLE001 - a syntax Hydra itself will report better
        log.debug("preflight skipped: %s", err)
        return None
    jobs = list(itertools.islice(itertools.product(*axes), MAX_PREFLIGHT_JOBS))
    if gpu_names is None:
        gpu_names = detect_gpu_names()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="warpk"):
        for job in jobs:
            try:
                config = compose_job(lambda ov: compose("config", overrides=ov), list(job), gpu_names)
                require_wandb(config.logger)
                if config.stage in EVALUATING_STAGES:
                    resolve_sandbox(config.evaluate.sandbox, config.evaluate.cache_dir or None)
                if config.tasks.source == "synthetic":
                    synthetic_settings(config.tasks)  # its vocabulary names known ops
                if config.stage == "train":
                    require_generator(config.policy.generator, config.hardware.device)
                if config.policy.checkpoint and config.stage in ("train", "evaluate"):
                    check_checkpoint(config.policy)  # a warm start or a sampled policy: loadable?
                if _loads_policy(config):
                    require_weights(config.policy, cache_dir(config))
            except (ConfigError, HardwareError, SandboxUnavailable, CheckpointMismatch,
                    PolicyWeightsMissing, TaskError) as err:
                return str(err) + (f"  [job: {' '.join(job)}]" if multirun else "")
            except Exception as err:  # noqa: BLE001 - Hydra's composition errors
                return _explain(err)
    return None


def _loads_policy(config: RunConfig) -> bool:
    """Whether the job loads the policy's base weights: training, M5's GRPO rounds, sampling a
    checkpoint."""
    return (config.stage == "train" or (config.stage == "hrl" and config.runtime.hrl.grpo)
            or (config.stage == "evaluate" and bool(config.policy.checkpoint)))


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass


def _tags_and_group(config: RunConfig) -> tuple[list[str], str | None, str]:
    hc = HydraConfig.get()
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra") and v}
    choices["hardware"] = config.hardware.name  # the resolved profile, not "auto"
    tags = [f"{k}:{v}" for k, v in sorted(choices.items())] + [f"stage:{config.stage}"]
    group = None
    if hc.mode == RunMode.MULTIRUN:
        group = "sweep-" + "-".join(Path(hc.sweep.dir).parts[-2:])
    name = f"{config.model.name}-{config.stage}-seed{config.seed}"
    if hc.mode == RunMode.MULTIRUN:
        name += f"-job{hc.job.num}"
    return tags, group, name


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float:
    """One job: typed config -> stage -> summary.json (+ W&B). Returns the stage's objective
    (warpk.stages.OBJECTIVES) for Hydra's sweepers; the whole summary is in summary.json."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    tolerate_requeue_kill()
    try:
        config = to_run_config(cfg)
        if config.hardware.name == "auto":  # composed again with this node's profile
            from hydra import compose

            hc = HydraConfig.get()
            name, job = hc.job.config_name, list(hc.overrides.task)
            config = compose_job(lambda ov: compose(name, overrides=ov), job)
        check_available(config.stage)
        require_device(config.hardware.device, config.hardware.name)
        if config.stage in EVALUATING_STAGES:
            resolve_energy(config.evaluate.energy, config.hardware.device, config.hardware.name,
                           sampler_addr=config.evaluate.sampler_addr)
            resolve_sandbox(config.evaluate.sandbox, config.evaluate.cache_dir or None)
        if config.stage == "train":
            require_processes(config.train.processes, config.hardware.device)
    except (ConfigError, HardwareError, StageUnavailable, SandboxUnavailable) as err:
        refuse(err)
    _seed_everything(config.seed)
    resolved = OmegaConf.structured(config)
    (run_dir / "resolved_config.yaml").write_text(OmegaConf.to_yaml(resolved))
    if config.stage == "train" and distributed.needs_launch(config.train.processes):
        return objective(config.stage, _train_processes(config, run_dir))
    tags, group, name = _tags_and_group(config)
    log.info(
        "stage=%s model=%s hardware=%s -> %s", config.stage, config.model.name, config.hardware.name, run_dir
    )
    # one W&B run and one summary.json per job: in a distributed run, rank 0's
    logger = config.logger if distributed.is_main() else dataclasses.replace(config.logger, mode="disabled")
    with wandb_run(logger, run_dir, OmegaConf.to_container(resolved), tags, group, name) as run:
        try:
            summary = run_stage(config, run_dir, run.log)
        except (TaskError, PolicyWeightsMissing, ConfigError, CalibrationError, HarnessFailure,
                SandboxUnavailable) as err:
            refuse(err)  # a HarnessFailure is ours, never a candidate's verdict: nothing is summarised
        run.summary.update({k: v for k, v in summary.items() if v is not None})
    # the commit behind the run, for reports' manifests (not a metric: kept out of W&B's summary)
    if distributed.is_main():
        record = {**summary, "git_commit": git_head()}
        (run_dir / "summary.json").write_text(json.dumps(record, indent=2) + "\n")
    return objective(config.stage, summary)


def _train_processes(config: RunConfig, run_dir: Path) -> dict:
    """stage=train as train.processes processes (warpk.trainers.distributed); rank 0's summary."""
    n = config.train.processes
    log.info("stage=train as %d processes (torch.distributed.run) -> %s", n, run_dir)
    code = distributed.launch(n, list(HydraConfig.get().overrides.task), run_dir)
    if code != 0:
        sys.exit(f"warpk: the {n} training processes failed (exit code {code}); each one's output is above")
    return json.loads((run_dir / "summary.json").read_text())


def refuse(err: BaseException) -> NoReturn:
    """An expected user error inside a job, or a failure of the evaluator itself (HarnessFailure:
    a task whose reference cannot run, a sandbox that cannot start the worker): one line on
    stderr and exit status 2, as preflight's refusals (never a traceback)."""
    print(f"warpk: {' '.join(str(err).split())}", file=sys.stderr)
    raise SystemExit(2)


def cli() -> None:
    error = preflight(sys.argv[1:])
    if error:
        print(f"warpk: bad config: {error}", file=sys.stderr)
        sys.exit(2)
    main()


if __name__ == "__main__":
    cli()
