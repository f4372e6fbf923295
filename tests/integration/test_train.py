"""stage=train on the CPU with policy=tiny: real trl, peft, evaluator and W&B offline.

- the acceptance command end to end (W&B keys of every reward term, checkpoints, records.jsonl)
- the real evaluator behind the reward source: known completions score in tier order, and a
  correct solution of task A submitted for task B is not ok (task binding)
- SFT 2 steps: LoRA weights change, base weights do not
- resume: 2 steps, then max_steps=3 continues from step 2 with the saved LoRA weights
- stage=evaluate policy.checkpoint=DIR samples the trained adapter
"""

import json

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import run_warpk
from warpk.__main__ import compose_config, preflight
from warpk.policy import load_policy
from warpk.records import EvalRecord
from warpk.rewards import reward_functions
from warpk.rewards.adapters import completion_text
from warpk.tracking import read_offline_run
from warpk.trainers import common, grpo, sft
from warpk.trainers.checkpoints import latest_checkpoint, write_stamp
from warpk.trainers.data import fenced, heldout_tasks, train_tasks
from warpk.trainers.source import EvaluatorSource


def config(*overrides: str):
    base = ["policy=tiny", "hardware=cpu", "logger=disabled", "train.heldout_eval=false"]
    arm = [] if any(o.startswith("model=") for o in overrides) else ["model=m0"]  # it picks stage=train
    return compose_config(base + arm + list(overrides), [])


@pytest.fixture(scope="module")
def m3_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("m3")
    result = run_warpk("stage=train", "model=m3", "policy=tiny", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir, result


@pytest.mark.slow
def test_grpo_run_logs_every_reward_term_of_the_arm_to_wandb(m3_run):
    run_dir, _ = m3_run
    cfg = config("model=m3")
    names = [f.__name__ for f in reward_functions(None, cfg.reward)[0]]
    assert names == ["total", "correctness", "speedup", "energy", "power", "ipw"]
    run = read_offline_run(run_dir)
    rows = [h for h in run["history"] if "train/reward" in h]
    assert [h["train/global_step"] for h in rows] == [1, 2]  # trl logged into the job's run
    for term in names:
        assert all(f"train/rewards/{term}/mean" in h for h in rows), term
    # The tiny policy writes no code: every completion gets the no-code tier ...
    assert all(h["train/rewards/correctness/mean"] == cfg.reward.reward_no_code for h in rows)
    # ... and a term that is None for the whole batch is logged as null, not dropped.
    assert all(h["train/rewards/energy/mean"] is None for h in rows)
    assert run["exit_code"] == 0


@pytest.mark.slow
def test_grpo_run_writes_checkpoints_adapter_and_heldout_records(m3_run):
    run_dir, result = m3_run
    assert (run_dir / "checkpoints" / "checkpoint-2" / "adapter_model.safetensors").is_file()
    stamp = json.loads((run_dir / "adapter" / "warpk_policy.json").read_text())
    assert stamp["policy"] == "tiny" and stamp["arm"] == "m3" and stamp["global_step"] == 2
    records = [EvalRecord.from_json(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    cfg = config("model=m3")
    k = cfg.train.samples_per_task
    assert {r.task_id.split("/")[1] for r in records} == {
        "04_rms_norm", "08_swiglu_mlp", "11_cross_entropy", "15_group_norm",
        "19_fused_add_rms_norm_bf16", "22_layer_norm_modulate",
    }  # fmt: skip
    assert sorted(r.sample for r in records) == sorted(list(range(k)) * 6)
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ("compile_rate", "correct_rate", "fast_1", "pass_at_1", "pass_at_k", "geomean_speedup"):
        assert key in summary
    assert summary["global_step"] == 2 and summary["pass_k"] == k
    assert summary["train/completions"] == 16  # 2 steps x 8 (group size 8, one prompt per step)
    assert "pass@1=" in result.stdout


@pytest.mark.slow
def test_evaluate_stage_samples_a_trained_checkpoint(m3_run, tmp_path):
    adapter = m3_run[0] / "adapter"
    result = run_warpk(
        "stage=evaluate", "policy=tiny", f"policy.checkpoint={adapter}", "tasks.split=heldout",
        "train.samples_per_task=3", "logger=disabled", f"hydra.run.dir={tmp_path}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    records = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(records) == 6 * 3
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["pass_k"] == 3
    assert summary["trained_arm"] == "m3"  # from the adapter's stamp: reports label the run with it
    other = run_warpk(
        "stage=evaluate", "policy=tiny", "policy.hidden_size=32", f"policy.checkpoint={adapter}",
        "logger=disabled", f"hydra.run.dir={tmp_path / 'other'}",
    )  # fmt: skip
    assert other.returncode != 0 and "trained on another base model" in other.stderr


def test_known_completions_through_the_real_evaluator_score_in_tier_order():
    cfg = config("model=m2")
    tasks = {t.name: t for t in train_tasks(cfg)}
    gelu, mish = tasks["03_gelu_tanh"], tasks["14_mish"]
    gelu_solution = (gelu.path.parents[1] / "solutions" / gelu.name / "torch_fused.py").read_text()
    source = EvaluatorSource(common.build_evaluator(cfg), list(tasks.values()))
    funcs, weights = reward_functions(source, cfg.reward)
    answer = [{"role": "assistant", "content": "Sure!\n" + fenced(gelu_solution)}]
    completions = [answer, answer, [{"role": "assistant", "content": "def f(): pass"}]]
    task_ids = [gelu.task_id, mish.task_id, gelu.task_id]  # a mixed batch: gelu's code for mish too
    scores = {f.__name__: f(prompts=[None] * 3, completions=completions, task_id=task_ids) for f in funcs}
    assert source.batches == 1  # every term of the batch shared one evaluate_many
    right, wrong_task, no_code = source.last
    assert right.status == "ok" and right.task_id == gelu.task_id
    assert wrong_task.status == "incorrect" and wrong_task.task_id == mish.task_id, wrong_task
    assert no_code is None
    total = scores["total"]
    assert total[0] > total[1] > total[2] == cfg.reward.reward_no_code
    assert scores["correctness"] == [0.0, cfg.reward.reward_incorrect, cfg.reward.reward_no_code]
    assert scores["energy"] == [None, None, None]  # CPU energy is modelled: not a reward
    assert weights[0] == 1.0 and set(weights[1:]) == {0.0}


def _split(model) -> tuple[dict, dict]:
    lora, base = {}, {}
    for name, p in model.named_parameters():
        (lora if "lora_" in name else base)[name] = p.detach().clone()
    return lora, base


@pytest.mark.slow
def test_sft_two_steps_change_lora_weights_and_leave_the_base_alone(tmp_path):
    cfg = config("model=m0", "train.max_steps=7", "train.sft_max_steps=2", "train.sft_learning_rate=3e-4")
    trainer = sft.build_trainer(cfg, tmp_path)
    assert (trainer.args.max_steps, trainer.args.learning_rate) == (2, 3e-4)  # SFT's own keys
    lora_before, base_before = _split(trainer.model)
    assert lora_before and base_before
    trainer.train()
    lora_after, base_after = _split(trainer.model)
    assert trainer.state.global_step == 2
    assert any(not torch.equal(lora_before[n], lora_after[n]) for n in lora_before)
    assert all(torch.equal(base_before[n], base_after[n]) for n in base_before)


class _VaryingSource:
    """Ok records whose speedup depends on the completion text: rewards differ inside a group,
    so GRPO has non-zero advantages and its LoRA weights move (the tiny policy never writes code)."""

    def records_for(self, completions, task_ids):
        out = []
        for c, task_id in zip(completions, task_ids, strict=True):
            ms = 1.0 + sum(map(ord, completion_text(c))) % 7
            out.append(
                EvalRecord(
                    task_id=task_id,
                    candidate="c",
                    candidate_sha="s",
                    status="ok",
                    runtime_ms=ms,
                    ref_runtime_ms=4.0,
                    speedup=4.0 / ms,
                )  # fmt: skip
            )
        return out


@pytest.mark.slow
def test_resume_continues_from_the_latest_checkpoint_with_its_lora_weights(tmp_path):
    cfg2 = config("model=m1", "train.max_steps=2", "train.learning_rate=1e-2")
    first = grpo.build_trainer(cfg2, tmp_path, _VaryingSource())
    first.train(resume_from_checkpoint=common.resume_point(cfg2, tmp_path))
    saved = latest_checkpoint(tmp_path)
    assert saved.name == "checkpoint-2"
    saved_lora = load_file(saved / "adapter_model.safetensors")
    assert any(t.abs().sum() > 0 for n, t in saved_lora.items() if "lora_B" in n)  # trained

    cfg3 = config("model=m1", "train.max_steps=3", "train.learning_rate=1e-2")
    second = grpo.build_trainer(cfg3, tmp_path, _VaryingSource())
    seen = {}

    from transformers import TrainerCallback

    class Snapshot(TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, **kwargs):
            if not seen:
                seen["step"] = state.global_step
                seen["lora"] = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_B" in n}

    second.add_callback(Snapshot())
    resume = common.resume_point(cfg3, tmp_path)
    assert resume == str(saved)
    second.train(resume_from_checkpoint=resume)
    assert seen["step"] == 2 and second.state.global_step == 3
    by_suffix = {n.split("base_model.model.")[-1]: t for n, t in saved_lora.items()}
    for name, tensor in seen["lora"].items():
        key = name.split("base_model.model.")[-1].replace(".default", "")
        assert torch.equal(tensor, by_suffix[key]), name
    assert latest_checkpoint(tmp_path).name == "checkpoint-3"


@pytest.mark.slow
def test_multiturn_training_rewards_the_discounted_return_of_its_turns(tmp_path):
    cfg = config("model=m1", "model.turns=2", "train.max_steps=1", "train.turn_discount=0.5")
    source = _VaryingSource()
    trainer = grpo.build_trainer(cfg, tmp_path, source)
    trainer.train()
    (row,) = [h for h in trainer.state.log_history if "rewards/total/mean" in h]
    turn0, turn1 = row["turns/turn0/total_mean"], row["turns/turn1/total_mean"]
    assert row["rewards/total/mean"] == pytest.approx(turn0 + 0.5 * turn1, abs=1e-6)
    assert trainer.rollout_func is not None  # the turns are sampled by warpk's rollout and trained on


@pytest.mark.slow
def test_the_configured_negative_advantage_weight_picks_the_trainer(tmp_path):
    from trl import GRPOTrainer

    plain = grpo.build_trainer(config("model=m1", "train.max_steps=1"), tmp_path / "a", _VaryingSource())
    cfg = config("model=m1", "train.max_steps=1", "train.negative_advantage_weight=0.1")
    weighted = grpo.build_trainer(cfg, tmp_path / "b", _VaryingSource())
    assert type(plain) is GRPOTrainer
    assert isinstance(weighted, GRPOTrainer) and type(weighted).__name__ == "WarpkGRPOTrainer"
    cfg = config("model=m1", "train.max_steps=1", "train.credit_cutoff=0.5")
    assert type(grpo.build_trainer(cfg, tmp_path / "c", _VaryingSource())).__name__ == "WarpkGRPOTrainer"


@pytest.mark.slow
def test_grpo_samples_and_scores_without_dropout(tmp_path):
    """LoRA dropout (policy.lora_dropout) is off in the GRPO trainer's model: completions come from
    the policy whose log-probabilities the loss uses."""
    cfg = config("model=m1", "train.max_steps=1", "policy.lora_dropout=0.05")
    trainer = grpo.build_trainer(cfg, tmp_path, _VaryingSource())
    dropouts = [m for name, m in trainer.model.named_modules() if "lora_dropout" in name and hasattr(m, "p")]
    assert dropouts and all(m.p == 0 for m in dropouts)


@pytest.mark.slow
def test_the_configured_optimizer_is_the_one_grpo_steps_with(tmp_path):
    """train.optim=sgd: GRPO's optimizer is plain SGD at the configured rate (SFT keeps AdamW)."""
    cfg = config("model=m1", "train.max_steps=1", "train.optim=sgd", "train.learning_rate=0.5")
    trainer = grpo.build_trainer(cfg, tmp_path, _VaryingSource())
    optimizer = trainer.create_optimizer()
    assert type(optimizer) is torch.optim.SGD and optimizer.defaults["lr"] == 0.5
    adam = grpo.build_trainer(config("model=m1", "train.max_steps=1"), tmp_path / "b", _VaryingSource())
    assert type(adam.create_optimizer()) is torch.optim.AdamW
    assert common.trainer_args(cfg, tmp_path, sft=True)["optim"] == "adamw_torch"


# --- warm start (policy.checkpoint with stage=train) and full fine-tuning ------------------------
def _sft(tmp_path, *overrides: str):
    """A 2-step M0 run's adapter dir."""
    run_dir = tmp_path / "m0"
    cfg = config("model=m0", "train.sft_max_steps=2", "train.sft_learning_rate=1e-2", *overrides)
    assert cfg.train.sft_max_steps == 2
    sft.run_sft(cfg,
                run_dir, lambda metrics: None)  # fmt: skip
    return run_dir / "adapter"


@pytest.mark.slow
def test_grpo_warm_start_trains_the_m0_adapter_from_its_saved_weights(tmp_path):
    adapter = _sft(tmp_path)
    saved = load_file(adapter / "adapter_model.safetensors")
    assert any(t.abs().sum() > 0 for n, t in saved.items() if "lora_B" in n)  # SFT moved them
    cfg = config("model=m1", "train.max_steps=1", "train.learning_rate=1e-2", f"policy.checkpoint={adapter}")
    trainer = grpo.build_trainer(cfg, tmp_path / "m1", _VaryingSource())
    lora = {n: p for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert lora and all(p.requires_grad for p in lora.values())  # the M0 adapter itself trains
    by_suffix = {n.split("base_model.model.")[-1]: t for n, t in saved.items()}
    for name, p in lora.items():
        assert torch.equal(p.detach(), by_suffix[name.split("base_model.model.")[-1].replace(".default", "")])
    before = {n: p.detach().clone() for n, p in lora.items()}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[n], after[n].detach()) for n in before)


@pytest.mark.slow
def test_full_finetune_trains_every_weight_and_warm_starts_from_the_saved_model(tmp_path):
    model_dir = _sft(tmp_path, "policy=small", "train.sft_batch_size=2")
    stamp = json.loads((model_dir / "warpk_policy.json").read_text())
    assert stamp["policy"] == "small" and stamp["finetune"] == "full"
    saved = load_file(model_dir / "model.safetensors")
    base, _ = load_policy(config("policy=small").policy, common.cache_dir(config("policy=small")))
    assert all(p.requires_grad for p in base.parameters())
    changed = [n for n, p in base.named_parameters() if not torch.equal(p.detach(), saved[n])]
    assert "model.embed_tokens.weight" in changed and len(changed) == len(list(base.parameters()))
    cfg = config("model=m1", "policy=small", "train.max_steps=1", f"policy.checkpoint={model_dir}")
    trainer = grpo.build_trainer(cfg, tmp_path / "m1", _VaryingSource())
    assert all(torch.equal(p.detach(), saved[n]) for n, p in trainer.model.named_parameters())


def test_a_bad_checkpoint_is_refused_at_preflight_naming_the_key(tmp_path):
    job = ["stage=train", "model=m1", "logger=disabled"]
    assert "is not a directory" in preflight([*job, f"policy.checkpoint={tmp_path / 'nope'}"], [])
    assert "holds no adapter_config.json" in preflight([*job, f"policy.checkpoint={tmp_path}"], [])
    (tmp_path / "adapter_config.json").write_text("{}")
    write_stamp(tmp_path, config("policy=tiny", "policy.hidden_size=32").policy, arm="m0")
    error = preflight([*job, f"policy.checkpoint={tmp_path}"], [])
    assert "policy.checkpoint=" in error and "hidden_size: trained 32, requested 64" in error
    result = run_warpk(*job, f"policy.checkpoint={tmp_path / 'nope'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode != 0 and "is not a directory" in result.stderr
    assert not (tmp_path / "run").exists()  # refused before anything ran


@pytest.mark.slow
def test_training_as_two_processes_shares_one_run_dir_one_adapter_and_one_summary(tmp_path):
    """train.processes=2 on the CPU: torchrun starts two ranks (gloo DDP through accelerate), both
    train on the same run dir, rank 0 alone writes the summary and the held-out records."""
    run_dir = tmp_path / "run"
    result = run_warpk("stage=train", "model=m1", "policy=tiny", "hardware=cpu", "logger=disabled",
                       "train.processes=2", "train.samples_per_task=1", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "training process 1 of 2" in out and "training process 2 of 2" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["train/processes"] == 2.0 and summary["global_step"] == 2.0
    assert summary["train/completions"] == 2 * 2 * 8  # steps x processes x per-device batch
    assert (run_dir / "adapter" / "adapter_config.json").is_file()
    assert (run_dir / "adapter" / "warpk_policy.json").is_file()
    records = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(records) == len(heldout_tasks(config()))  # one held-out evaluation, not one per rank


def test_more_processes_than_gpus_is_refused_before_training(tmp_path):
    from warpk.hardware import HardwareError, require_processes

    with pytest.raises(HardwareError, match=r"train.processes=8 .* NVML finds 1 GPU\(s\)"):
        require_processes(8, "cuda", ["NVIDIA H100"])
    require_processes(8, "cpu", [])  # CPU ranks share the cores
    require_processes(1, "cuda", [])


def test_vllm_generation_is_refused_in_one_line_where_it_cannot_run(tmp_path):
    from warpk.hardware import HardwareError, require_generator

    result = run_warpk("stage=train", "model=m1", "policy=tiny", "hardware=cpu", "policy.generator=vllm",
                       f"hydra.run.dir={tmp_path / 'run'}", timeout=120)
    assert result.returncode != 0 and not (tmp_path / "run").exists()
    assert "policy.generator=vllm needs a GPU profile" in result.stderr
    with pytest.raises(HardwareError, match="needs the vllm package, which is not installed"):
        require_generator("vllm", "cuda", find_spec=lambda name: None)
    require_generator("vllm", "cuda", find_spec=lambda name: object())  # installed: allowed
    require_generator("hf", "cpu")


def test_each_generator_asks_trl_for_its_engine_and_hf_for_nothing():
    args = grpo.generator_args(config("model=m1", "policy.generator=vllm"))
    assert args["use_vllm"] and args["vllm_mode"] == "colocate"
    assert args["vllm_max_model_length"] == 4096 + 64  # max_prompt_length + tiny's max_new_tokens
    assert grpo.generator_args(config("model=m1")) == {}
    static = grpo.generator_args(config("model=m1", "policy.generator=hf-static"))
    assert static == {"cache_implementation": "static", "pad_to_multiple_of": grpo.STATIC_PROMPT_BUCKET}
    paged = grpo.generator_args(config("model=m1", "policy.generator=hf-paged", "hardware=h200"))
    assert paged == {"use_transformers_continuous_batching": True}  # sized by transformers from free memory
    # on the CPU, sized for one generation batch (not half the host's RAM): 8 completions of at most
    # 4096 prompt + 64 new tokens, in pages of 256 tokens
    paged = grpo.generator_args(config("model=m1", "policy.generator=hf-paged", "hardware=cpu"))
    assert paged["transformers_continuous_batching_config"] == {
        "page_size": 256, "num_blocks": 8 * 17, "max_batch_tokens": 8192}


def test_the_advantage_scaling_reaches_trl(tmp_path):
    assert grpo.grpo_args(config("model=m1", "train.scale_rewards=none"), tmp_path).scale_rewards == "none"
    assert grpo.grpo_args(config("model=m1"), tmp_path).scale_rewards == "group"  # trl's default


def test_the_loss_aggregation_reaches_trl(tmp_path):
    assert grpo.grpo_args(config("model=m1", "train.loss_type=grpo"), tmp_path).loss_type == "grpo"
    assert grpo.grpo_args(config("model=m1"), tmp_path).loss_type == "dapo"  # trl's default


def test_multiturn_with_vllm_generation_is_refused_before_anything_runs(tmp_path):
    result = run_warpk(
        "stage=train", "model=m1", "model.turns=2", "policy.generator=vllm", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "model.turns=2 with policy.generator=vllm is not allowed" in result.stderr
