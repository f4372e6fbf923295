"""Composition: every option of every group converts to the typed config; bad input fails early."""

import re

import pytest
from hydra import compose, initialize_config_dir

from tests.conftest import run_warpk
from warpk.__main__ import CONF_DIR, compose_config, preflight
from warpk.config import ConfigError
from warpk.hardware import HardwareError, detect_gpu_names, profile_for

GROUPS = {
    g: sorted(p.stem for p in (CONF_DIR / g).glob("*.yaml"))
    for g in ("model", "policy", "train", "reward", "hardware", "sla", "tasks", "logger")
}


def _compose(*overrides: str, gpu_names=()):
    return compose_config(list(overrides), list(gpu_names))


def test_groups_have_the_designed_options():
    assert GROUPS["model"] == ["m0", "m1", "m2", "m3", "m4", "m5", "none"]
    assert GROUPS["hardware"] == ["auto", "cpu", "h100", "h200"]
    assert GROUPS["sla"] == ["latency_sensitive", "mixed", "throughput"]
    assert GROUPS["logger"] == ["disabled", "wandb_offline", "wandb_online"]
    assert GROUPS["reward"] == ["energy", "hrl", "ipw_blend", "kernel"]
    assert GROUPS["policy"] == ["qwen2.5-coder-1.5b", "qwen2.5-coder-7b", "small", "tiny"]
    assert GROUPS["train"] == ["full", "small_cpu", "smoke"]


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_every_option_composes_and_converts(group, option):
    run = _compose(f"{group}={option}")
    node = getattr(run, group)
    if group == "tasks":
        assert node.source == option
    elif group == "logger":
        assert node.mode == {"wandb_offline": "offline", "wandb_online": "online"}.get(option, option)
    elif group == "hardware" and option == "auto":
        assert node.name == "cpu"  # no GPU names given
    else:
        assert node.name == option


def test_default_is_the_cpu_evaluate_job():
    run = _compose()
    assert (run.stage, run.model.name, run.policy.name) == ("evaluate", "none", "tiny")
    assert run.tasks.source == "bundled"
    assert run.logger.mode == "offline"
    assert run.hardware.name == "cpu" and run.hardware.device == "cpu"


@pytest.mark.parametrize(
    ("arm", "stage"),
    [("m0", "train"), ("m3", "train"), ("m4", "runtime"), ("m5", "hrl"), ("none", "evaluate")],
)
def test_the_arm_picks_its_stage(arm, stage):
    assert _compose(f"model={arm}").stage == stage


def test_the_served_gpu_is_a_second_instance_of_the_hardware_group():
    run = _compose("model=m4")
    assert run.runtime.served.name == "h200" and run.hardware.name == "cpu"  # the job's own: no GPU here
    assert [c.name for c in run.runtime.served.clock_profiles] == ["max", "balanced", "efficient"]
    h100 = _compose("model=m4", "hardware@runtime.served=h100").runtime.served
    assert (h100.name, h100.power_cap_max_w) == ("h100", 700)
    nvml = _compose("model=m4", "hardware=h100", "hardware@runtime.served=h100", "runtime.actuator.kind=nvml",
                    "runtime.actuator.nvml_opt_in=true")  # fmt: skip
    assert nvml.runtime.served.name == nvml.hardware.name == "h100"


def test_an_explicit_stage_overrides_the_arms_where_it_reads_any_arm():
    assert _compose("model=m1", "stage=evaluate").stage == "evaluate"  # evaluate with m1's reward
    assert _compose("model=m4", "stage=report").stage == "report"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("model=m4", "stage=train"), "stage=train needs model=m0|m1|m2|m3; model=m4 runs stage=runtime"),
        (("stage=train",), "stage=train needs model=m0|m1|m2|m3; model=none runs stage=evaluate"),
        (("model=m1", "stage=runtime"), "stage=runtime needs model=m4; model=m1 runs stage=train"),
        (("model=m4", "stage=hrl"), "stage=hrl needs model=m5; model=m4 runs stage=runtime"),
        (("model=m1", "train.per_device_batch_size=3"), "= 3 must be a multiple of train.num_generations=8"),
        (("model=m5", "train.per_device_batch_size=3"), "= 3 must be a multiple of train.num_generations=8"),
        (("model=m4", "hardware=h100", "runtime.actuator.kind=nvml", "runtime.actuator.nvml_opt_in=true"),
         "runtime.actuator.kind=nvml needs hardware=h200 (hardware@runtime.served, the simulated GPU), "
         "got hardware=h100"),
        (("model=m5", "runtime.ppo.seeds=3"), "stage=hrl trains one PPO model per arm on one env"),
        (("model=m5", "runtime.selection.evaluate_on=tuning"), "allowed here: 1, 1, heldout, false, 0"),
        (("model=m5", "runtime.ppo.normalize=true"),
         "runtime.ppo.normalize=true, runtime.selection.select_episodes=0 are"),
        (("model=m5", "runtime.selection.select_episodes=8"),
         "runtime.selection.select_episodes=8 are stage=runtime's"),
        (("model=m4", "hardware@runtime.served=cpu"),
         "hardware@runtime.served=cpu, which has no power-cap range or clock profiles to control"),
        (("model=m4", "reward=kernel"), "stage=runtime trains the controller on reward.beta_energy"),
        (("model=m5", "reward.beta_energy=0", "reward.gamma_sla=0"), "both 0 in reward=hrl"),
    ],
)
def test_a_stage_that_cannot_run_the_arm_is_refused_naming_both(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _compose(*overrides)


@pytest.mark.parametrize(
    "arm,reward,blend",
    [("m1", "kernel", 0.0), ("m2", "energy", 0.0), ("m3", "ipw_blend", 0.25), ("m4", "hrl", 0.0)],
)
def test_arm_presets_pick_their_reward(arm, reward, blend):
    run = _compose(f"model={arm}")
    assert (run.reward.name, run.reward.ipw_blend) == (reward, blend)


def test_override_on_top_of_an_arm_preset():
    run = _compose("model=m3", "reward.ipw_blend=0.1")
    assert (run.model.name, run.model.trainer, run.reward.ipw_blend) == ("m3", "grpo", 0.1)
    assert _compose("model=m2", "reward=kernel").reward.beta_energy == 0.0


@pytest.mark.parametrize(
    "gpus,profile", [(["NVIDIA H200"], "h200"), (["NVIDIA H100 80GB HBM3"], "h100"), ([], "cpu")]
)
def test_hardware_auto_follows_the_gpu(gpus, profile):
    run = _compose(gpu_names=gpus)
    assert run.hardware.name == profile
    assert run.hardware.device == ("cpu" if profile == "cpu" else "cuda")
    assert run.hardware.tdp_w > run.hardware.idle_power_w


def test_hardware_auto_is_composed_again_as_an_override_of_the_detected_profile():
    """`hardware=auto` becomes `hardware=<profile>` in the job's overrides and Hydra composes
    the job again: the profile is Hydra's composition of conf/hardware/<profile>.yaml, every other
    override of the job is kept, and an explicit `hardware=auto` override is replaced."""
    from warpk.__main__ import compose_job

    seen = []

    def compose_fn(overrides):
        seen.append(overrides)
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="warpk"):
            return compose("config", overrides=overrides)

    job = ["hardware=auto", "seed=7", "hardware@runtime.served=h100"]
    run = compose_job(compose_fn, job, ["NVIDIA H200"])
    assert seen == [["hardware=auto", "seed=7", "hardware@runtime.served=h100"],
                    ["seed=7", "hardware@runtime.served=h100", "hardware=h200"]]
    assert (run.hardware.name, run.seed, run.runtime.served.name) == ("h200", 7, "h100")
    assert run.hardware == _compose("hardware=h200").hardware


def test_unknown_gpu_is_an_error_not_a_guess():
    with pytest.raises(HardwareError, match="NVIDIA A100.*no profile"):
        profile_for(["NVIDIA A100-SXM4-40GB"])


def test_detect_gpu_names_with_a_fake_nvml():
    class FakeNvml:
        class NVMLError(Exception):
            pass

        def __init__(self, names, fail=False):
            self.names, self.fail, self.shut = names, fail, False

        def nvmlInit(self):
            if self.fail:
                raise self.NVMLError("library not found")

        def nvmlDeviceGetCount(self):
            return len(self.names)

        def nvmlDeviceGetHandleByIndex(self, i):
            return i

        def nvmlDeviceGetName(self, handle):
            return self.names[handle].encode()

        def nvmlShutdown(self):
            self.shut = True

    fake = FakeNvml(["NVIDIA H200", "NVIDIA H200"])
    assert detect_gpu_names(fake) == ["NVIDIA H200", "NVIDIA H200"] and fake.shut
    assert detect_gpu_names(FakeNvml([], fail=True)) == []


@pytest.mark.parametrize(
    "override,expected",
    [
        ("model=m9", "model=m9 is not an option; allowed: m0, m1, m2, m3, m4, m5, none"),
        ("reward.ipw_blend=abc", "reward.ipw_blend='abc' is not allowed; allowed: a number in [0, 1]"),
        ("reward.ipw_blend=-1", "reward.ipw_blend=-1.0 is not allowed; allowed: a number in [0, 1]"),
        ("sla=nope", "sla=nope is not an option; allowed: latency_sensitive, mixed, throughput"),
        ("tasks.split=test",
         "tasks.split='test' is not allowed; allowed: one of train, heldout, heldout_pair, all"),
        (
            "stage=serve",
            "stage='serve' is not allowed; allowed: one of evaluate, train, runtime, hrl, report",
        ),
        (
            "evaluate.timing_batches=1",
            "evaluate.timing_batches=1 is not allowed; allowed: an integer in [3, 10000]",
        ),
        ("runtime.gpu=h100", "runtime.gpu is no longer a key: use hardware@runtime.served (h200 | h100)"),
        ("runtime.gpux=1", "runtime.gpux is not a config key (`python -m warpk --cfg job` lists them)"),
        # runtime's sections (2026-12-05): a bad value names the key; an old flat key names the new one
        ("runtime.ppo.seeds=0", "runtime.ppo.seeds=0 is not allowed; allowed: an integer in [1, 100]"),
        ("runtime.selection.evaluate_on=test",
         "runtime.selection.evaluate_on='test' is not allowed; allowed: one of heldout, tuning, validation"),
        ("runtime.workload.arrival_rate_rps=0",
         "runtime.workload.arrival_rate_rps=0.0 is not allowed; allowed: a number in [0.01, 1000]"),
        ("runtime.workload.burst_factor=6",
         "runtime.workload.burst_factor * runtime.workload.burst_fraction = 1.2 must be < 1 "
         "(the rate outside bursts would be negative)"),
        ("runtime.actuator.kind=nvml",
         "runtime.actuator.kind=nvml changes the GPU's power limit and clocks; "
         "set runtime.actuator.nvml_opt_in=true to allow it (never on a shared GPU)"),
        ("runtime.ppo_seeds=3", "runtime.ppo_seeds is no longer a key: use runtime.ppo.seeds"),
        ("runtime.eval_seeds=20", "runtime.eval_seeds is no longer a key: use runtime.selection.eval_seeds"),
        ("runtime.ppo_select_episodes=8",
         "runtime.ppo_select_episodes is no longer a key: use runtime.selection.select_episodes"),
        ("runtime.arrival_rate_rps=5",
         "runtime.arrival_rate_rps is no longer a key: use runtime.workload.arrival_rate_rps"),
        ("runtime.actuator=nvml", "runtime.actuator is no longer a key: use runtime.actuator.kind"),
        ("runtime.hrl_rounds=1", "runtime.hrl_rounds is no longer a key: use runtime.hrl.rounds"),
        ("runtime.kernel_records=x.jsonl",
         "runtime.kernel_records is no longer a key: use runtime.hrl.kernel_records"),
        ("runtime.ppo.seedz=3",
         "runtime.ppo.seedz is not a config key (`python -m warpk --cfg job` lists them)"),
    ],
)
def test_bad_override_names_key_and_allowed_values(override, expected):
    assert preflight([override], gpu_names=[]) == expected


def test_every_old_flat_runtime_key_names_a_new_key_that_exists():
    from warpk.config import RUNTIME_RENAMED, field_at

    for old, new in RUNTIME_RENAMED.items():
        assert field_at(new) is not None, f"{old} -> {new}: no such key"
        assert old == "runtime.actuator" or field_at(old) is None, f"{old} is still a key"


def test_cross_field_checks():
    assert _compose("sla.ttft_p95_s=20").sla.ttft_p95_s == 20  # still below mixed's 30 s E2E
    with pytest.raises(ConfigError, match="sla.ttft_p95_s=40.0 must be <= sla.e2e_p95_s=30.0"):
        _compose("sla.ttft_p95_s=40")
    with pytest.raises(ConfigError, match="failure tiers"):
        _compose("reward.reward_no_code=-0.1")  # a missing answer must not beat a compile error
    with pytest.raises(ConfigError, match="need an explicit profile"):
        _compose("hardware.tdp_w=500")  # hardware=auto would silently drop it


def test_the_controller_and_generator_rules_leave_valid_runs_alone():
    # multi-turn samples its turns with HF generate: hf-static (the Qwen default) is fine, vllm is not
    assert _compose("model=m1", "policy=qwen2.5-coder-7b", "model.turns=3").policy.generator == "hf-static"
    # stage=hrl has no actuator: the NVML rule is stage=runtime's
    _compose("model=m5", "hardware=h100", "runtime.actuator.kind=nvml", "runtime.actuator.nvml_opt_in=true")
    _compose("model=m4", "hardware=h200", "runtime.actuator.kind=nvml", "runtime.actuator.nvml_opt_in=true")


def test_sweep_is_checked_point_by_point_before_launch():
    error = preflight(["-m", "model=m1,m3", "reward.ipw_blend=0,0.1,1.5"], gpu_names=[])
    assert error.startswith("reward.ipw_blend=1.5 is not allowed; allowed: a number in [0, 1]")
    assert "[job: model=m1 reward.ipw_blend=1.5]" in error
    assert preflight(["-m", "model=m1,m2,m3", "seed=11,22,33"], gpu_names=[]) is None


def test_missing_policy_weights_are_refused_before_launch_where_downloads_are_off(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPK_HF_CACHE", str(tmp_path))
    monkeypatch.setenv("WARPK_HF_LOCAL_FILES_ONLY", "1")
    error = preflight(["-m", "model=m1,m2", "policy=qwen2.5-coder-7b"], gpu_names=[])
    assert "weights of Qwen/Qwen2.5-Coder-7B-Instruct not found at" in error
    assert "[job: model=m1 policy=qwen2.5-coder-7b]" in error
    assert preflight(["policy=qwen2.5-coder-7b"], gpu_names=[]) is None  # evaluate: loads no policy
    (tmp_path / "models--Qwen--Qwen2.5-Coder-7B-Instruct").mkdir()
    assert preflight(["model=m1", "policy=qwen2.5-coder-7b"], gpu_names=[]) is None
    monkeypatch.setenv("WARPK_HF_LOCAL_FILES_ONLY", "0")  # downloads allowed: nothing to know yet
    assert preflight(["model=m1", "policy=qwen2.5-coder-1.5b"], gpu_names=[]) is None


def test_launchers_compose():
    for launcher in ("basic", "submitit_local"):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="warpk"):
            cfg = compose("config", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
        assert launcher.split("_")[0] in cfg.hydra.launcher._target_.lower()
        assert cfg.hydra.job.name == "warpk"


def test_cli_bad_override_exits_nonzero_before_running():
    result = run_warpk("sla=nope")
    assert result.returncode == 2
    assert "sla=nope is not an option; allowed: latency_sensitive, mixed, throughput" in result.stderr
    assert "records" not in result.stdout


def test_cli_cfg_job_shows_the_composed_override():
    result = run_warpk("model=m3", "reward.ipw_blend=0.25", "--cfg", "job")
    assert result.returncode == 0, result.stderr
    assert "name: m3" in result.stdout and "ipw_blend: 0.25" in result.stdout
    assert "name: ipw_blend" in result.stdout


def test_cli_help_explains_groups_and_examples():
    result = run_warpk("--help")
    assert result.returncode == 0
    for text in (
        "model: m0, m1, m2, m3, m4, m5, none",
        "sla: latency_sensitive, mixed, throughput",
        "python -m warpk -m model=m1,m2,m3 seed=11,22,33",
        "python -m warpk model=m4 sla=mixed",
        "python -m warpk stage=report results=",
        "hydra/launcher",
    ):
        assert text in result.stdout, text


def test_a_stage_that_cannot_run_exits_with_one_line(tmp_path, monkeypatch):
    from warpk import stages

    monkeypatch.setitem(stages.NOT_YET, "report", "waits for something")
    with pytest.raises(stages.StageUnavailable, match="stage=report is not available yet: waits for"):
        stages.check_available("report")
    stages.check_available("evaluate")  # every other stage runs


def test_usable_cores_follow_the_affinity_not_the_node(monkeypatch):
    """A SLURM allocation or taskset gives the process fewer cores than the node has: the
    evaluator's workers and lanes are sized from those."""
    import os

    from warpk.hardware import usable_cores

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert usable_cores() == 2


def test_a_wandb_logger_is_refused_before_launch_where_wandb_is_not_installed(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    absent = lambda name, *a: None if name == "wandb" else real(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", absent)
    error = preflight(["logger=wandb_offline"], gpu_names=[])
    assert error.startswith("logger.mode=offline needs the wandb package, which is not installed here")
    assert "logger=disabled" in error
    assert preflight(["logger=disabled"], gpu_names=[]) is None
