"""Trainer plumbing without training: pass@k, datasets, reward source binding, checkpoint stamps."""

import dataclasses
import json
import math

import pytest

from warpk.__main__ import compose_config
from warpk.config import ConfigError, PolicyConfig
from warpk.evaluator import EvalItem
from warpk.policy import extract_code
from warpk.records import EvalRecord
from warpk.tasks import TaskError
from warpk.trainers import common
from warpk.trainers.checkpoints import (
    CheckpointMismatch,
    check_stamp,
    latest_checkpoint,
    write_stamp,
)
from warpk.trainers.data import grpo_rows, heldout_tasks, sft_rows, train_tasks
from warpk.trainers.sample import NO_CODE, evaluate_samples, pass_at_k, policy_metrics
from warpk.trainers.source import EvaluatorSource


def config(*overrides: str):
    base = ["policy=tiny", "hardware=cpu", "logger=disabled"]
    arm = [] if any(o.startswith("model=") for o in overrides) else ["model=m0"]  # it picks stage=train
    return compose_config(base + arm + list(overrides), [])


# --- pass@k (Chen et al. 2021), hand-computed --------------------------------------------------
@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 2 / 5),  # 1 - C(3,1)/C(5,1) = 1 - 3/5
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 0, 2, 0.0),
        (3, 2, 2, 1.0),  # n - c < k: every draw of 2 holds a correct one
        (1, 1, 1, 1.0),
    ],
)
def test_pass_at_k_matches_hand_computed_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 4), (3, 1, 0)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match="pass@k"):
        pass_at_k(n, c, k)


def _record(task: str, status: str, sample: int, speedup: float | None = None) -> EvalRecord:
    return EvalRecord(
        task_id=task,
        candidate=f"sample{sample}",
        candidate_sha="x",
        status=status,
        error=None if status == "ok" else "why",
        speedup=speedup,
        sample=sample,
    )


def test_policy_metrics_average_pass_at_k_over_tasks():
    records = [
        _record("a", "ok", 0, speedup=2.0),
        _record("a", "incorrect", 1),
        _record("b", "static_reject", 0),
        _record("b", "static_reject", 1),
    ]
    m = policy_metrics(records, k=2)
    assert m["pass_at_1"] == pytest.approx((0.5 + 0.0) / 2)
    assert m["pass_at_k"] == pytest.approx((1.0 + 0.0) / 2)
    assert m["compile_rate"] == pytest.approx(2 / 4)  # ok and incorrect compiled
    assert m["correct_rate"] == pytest.approx(1 / 4)
    assert m["fast_1"] == pytest.approx(1 / 4)
    assert m["geomean_speedup"] == pytest.approx(2.0)
    assert m["energy_ratio"] is None and m["energy_source"] == "none"


class _FakeEvaluator:
    """Says `ok` for the task whose solution text it is given, `incorrect` for any other."""

    def __init__(self):
        self.calls: list[list[EvalItem]] = []

    def evaluate_many(self, items):
        self.calls.append(list(items))
        return [
            _record(
                i.task.task_id, "ok" if i.task.name in i.candidate_source else "incorrect", 0, speedup=1.5
            )
            for i in items
        ]


def _answer(task_name: str) -> str:
    return f"Here:\n```python\n# solves {task_name}\nclass ModelNew:\n    pass\n```\n"


def test_evaluator_source_binds_each_completion_to_its_own_task_in_one_call():
    tasks = train_tasks(config())
    a, b = tasks[0], tasks[1]
    fake = _FakeEvaluator()
    source = EvaluatorSource(fake, tasks)
    completions = [
        [{"role": "assistant", "content": _answer(a.name)}],  # right task
        [{"role": "assistant", "content": _answer(a.name)}],  # A's answer, submitted for B
        [{"role": "assistant", "content": "no code at all"}],
        [{"role": "assistant", "content": _answer(b.name)}],
    ]
    records = source.records_for(completions, [a.task_id, b.task_id, a.task_id, b.task_id])
    assert len(fake.calls) == 1 and len(fake.calls[0]) == 3  # the no-code completion never runs
    assert [i.task.task_id for i in fake.calls[0]] == [a.task_id, b.task_id, b.task_id]
    assert [None if r is None else r.status for r in records] == ["ok", "incorrect", None, "ok"]
    assert source.counts == {"ok": 2, "incorrect": 1, "no_code": 1}
    with pytest.raises(KeyError, match="does not know"):
        source.records_for(["x"], ["bundled/nope"])


def test_evaluate_samples_labels_no_code_and_keeps_sample_index():
    tasks = heldout_tasks(config())
    t = tasks[0]
    fake = _FakeEvaluator()
    records = evaluate_samples({t.task_id: ["nonsense", _answer(t.name)]}, tasks, fake, "cpu")
    assert [r.sample for r in records] == [0, 1]
    assert records[0].status == "static_reject" and records[0].error == NO_CODE
    assert records[1].status == "ok" and len(fake.calls) == 1
    assert EvalRecord.from_json(records[1].to_json()) == records[1]


# --- datasets ------------------------------------------------------------------------------
def test_training_data_never_holds_a_heldout_task():
    cfg = config()
    heldout = {t.task_id for t in heldout_tasks(cfg)}
    assert heldout and all(t.split == "heldout" for t in heldout_tasks(cfg))
    train = {t.task_id for t in train_tasks(cfg)}
    assert train and not train & heldout
    assert {r["task_id"] for r in grpo_rows(cfg, train_tasks(cfg))} == train
    assert {r["task_id"] for r in sft_rows(cfg, train_tasks(cfg))} <= train
    with pytest.raises(TaskError, match="never trains on tasks.split=heldout"):
        train_tasks(config("tasks.split=heldout"))


def test_sft_pairs_on_cpu_are_torch_solutions_in_the_answer_format():
    cfg = config()
    rows = sft_rows(cfg, train_tasks(cfg))
    assert len(rows) == len(train_tasks(cfg))  # one torch solution per task runs on the CPU
    for row in rows:
        code = extract_code(row["completion"][0]["content"])
        assert code is not None and "load_inline" not in code and "triton" not in code
        name = row["task_id"].split("/")[1]
        assert row["prompt"][-1]["content"].count(name) >= 1


def test_long_prompts_are_left_out_and_none_left_is_an_error():
    class CountChars:  # a stand-in tokenizer: one token per character
        def apply_chat_template(self, messages, add_generation_prompt, tokenize):
            return "".join(m["content"] for m in messages)

        def __call__(self, text):
            return {"input_ids": list(text)}

    cfg = config()
    tasks = train_tasks(cfg)
    lengths = sorted(
        len(CountChars().apply_chat_template(r["prompt"], True, False)) for r in grpo_rows(cfg, tasks)
    )
    limit = lengths[len(lengths) // 2]
    kept = grpo_rows(config(f"train.max_prompt_length={limit}"), tasks, CountChars())
    assert 0 < len(kept) < len(tasks)
    with pytest.raises(TaskError, match="train.max_prompt_length"):
        grpo_rows(config("train.max_prompt_length=16"), tasks, CountChars())


# --- config --------------------------------------------------------------------------------
def test_group_size_must_divide_the_generation_batch():
    assert config("model=m2").train.num_generations == 8
    with pytest.raises(ConfigError, match="= 6 must be a multiple of train.num_generations=8"):
        config("model=m2", "train.per_device_batch_size=6")  # refused at preflight, before the queue
    assert config("model=m0", "train.per_device_batch_size=6").train.per_device_batch_size == 6  # SFT
    with pytest.raises(ConfigError, match="train.num_generations"):
        config("train.num_generations=1")


def test_sft_has_its_own_higher_learning_rate():
    assert config("model=m0").train.sft_learning_rate > config("model=m1").train.learning_rate


def test_the_policy_preset_picks_its_train_preset_and_the_command_line_wins():
    assert config().train.name == "smoke" and config().train.max_steps == 2
    assert config("policy=small").train.name == "small_cpu"
    qwen = config("policy=qwen2.5-coder-7b")
    assert qwen.train.name == "full" and qwen.train.max_steps >= 100 and qwen.policy.max_new_tokens >= 2048
    t = qwen.train
    assert t.per_device_batch_size * t.gradient_accumulation_steps >= 4 * t.num_generations  # 4 prompts
    assert config("policy=qwen2.5-coder-7b", "train=smoke").train.max_steps == 2


def test_the_qwen_presets_generate_with_the_compiled_static_cache_and_the_cpu_policies_with_hf():
    for preset in ("qwen2.5-coder-1.5b", "qwen2.5-coder-7b"):
        assert config(f"policy={preset}").policy.generator == "hf-static"
    assert config().policy.generator == config("policy=small").policy.generator == "hf"


# --- checkpoints ---------------------------------------------------------------------------
def test_stamp_refuses_an_adapter_of_another_base_model(tmp_path):
    tiny = PolicyConfig(name="tiny", hidden_size=64, num_hidden_layers=2)
    write_stamp(tmp_path, tiny, arm="m2")
    assert check_stamp(tmp_path, tiny)["arm"] == "m2"
    with pytest.raises(CheckpointMismatch, match="hidden_size: trained 64, requested 32"):
        check_stamp(tmp_path, PolicyConfig(name="tiny", hidden_size=32, num_hidden_layers=2))
    qwen = PolicyConfig(name="qwen2.5-coder-7b", hf_id="Qwen/Qwen2.5-Coder-7B-Instruct")
    with pytest.raises(CheckpointMismatch, match="policy=qwen2.5-coder-7b"):
        check_stamp(tmp_path, qwen)
    with pytest.raises(CheckpointMismatch, match="no warpk_policy.json"):
        check_stamp(tmp_path / "elsewhere", tiny)


def test_latest_checkpoint_is_the_highest_step_with_a_trainer_state(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for step, complete in ((2, True), (10, True), (12, False)):
        folder = tmp_path / "checkpoints" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        if complete:
            (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    assert latest_checkpoint(tmp_path).name == "checkpoint-10"  # 12 was torn: no state


def test_pass_at_k_is_monotone_in_k():
    values = [pass_at_k(8, 2, k) for k in range(1, 8)]
    assert all(b >= a for a, b in zip(values, values[1:], strict=False)) and math.isclose(values[-1], 1.0)


# --- multi-turn ----------------------------------------------------------------------------
def test_discounted_return_by_hand():
    from warpk.trainers.multiturn import discounted_return

    assert discounted_return([[-1.0, 0.5], [math.log(2), -0.5], [1.0, 1.0]], 0.5) == pytest.approx(
        [-1.0 + 0.5 * math.log(2) + 0.25, 0.5 - 0.25 + 0.25]
    )
    assert discounted_return([[0.3]], 0.9) == [0.3]


def test_feedback_reports_the_verdict():
    from warpk.trainers.multiturn import feedback

    assert "no ```python block" in feedback(None)
    wrong = dataclasses.replace(_record("a", "incorrect", 0), error="max abs err 0.2")
    assert "incorrect: max abs err 0.2" in feedback(wrong)
    assert "speedup over the reference 2.000x" in feedback(_record("a", "ok", 0, speedup=2.0))


class _Scripted:
    """A RecordSource whose verdicts follow the completion text: 'good' -> ok 2x, else no code."""

    def __init__(self):
        self.calls = []

    def records_for(self, completions, task_ids):
        self.calls.append([c if isinstance(c, str) else c[0]["content"] for c in completions])
        return [
            _record(t, "ok", 0, speedup=2.0) if "good" in c else None
            for c, t in zip(self.calls[-1], task_ids, strict=True)
        ]


class _FakeTrainer:
    """What MultiTurnRollout reads of trl's GRPOTrainer, around the tiny policy's tokenizer."""

    def __init__(self, tokenizer):
        from collections import defaultdict

        self.processing_class = tokenizer
        self.eos_token_ids = [tokenizer.eos_token_id]
        self._metrics = {"train": defaultdict(list)}
        self.model = type("Model", (), {"training": True})()


def test_multiturn_rollout_trains_every_turn_and_masks_the_feedback(tmp_path):
    from warpk.config import RewardConfig
    from warpk.policy import load_policy
    from warpk.rewards import SharedBatch, total_reward
    from warpk.trainers.multiturn import MultiTurnRollout, feedback, prompt_key

    _, tok = load_policy(PolicyConfig(), tmp_path)
    trainer = _FakeTrainer(tok)
    cfg, source = RewardConfig(), _Scripted()
    shared = SharedBatch(source)
    prompts = [[{"role": "user", "content": "task A"}], [{"role": "user", "content": "task B"}]]
    task_of = {prompt_key(p): t for p, t in zip(prompts, "ab", strict=True)}
    rollout = MultiTurnRollout(shared, cfg, 2, 0.5, task_of)
    eos = tok.eos_token_id
    scripted = iter([["bad", "bad"], ["good", "still bad"]])  # turn 0, then turn 1, per prompt
    contexts = []

    def generate(batch):
        contexts.append(batch)
        return [tok(text, add_special_tokens=False)["input_ids"] + [eos] for text in next(scripted)]

    rollout.generate = generate
    out = rollout(prompts, trainer)
    ok = total_reward(_record("a", "ok", 0, speedup=2.0), cfg)
    assert out["turn_return"] == pytest.approx([cfg.reward_no_code + 0.5 * ok, 1.5 * cfg.reward_no_code])
    assert source.calls == [["bad", "bad"], ["good", "still bad"]]  # each turn evaluated on its own
    for i, (ids, mask) in enumerate(zip(out["completion_ids"], out["env_mask"], strict=True)):
        assert len(ids) == len(mask)
        written = tok.decode([t for t, m in zip(ids, mask, strict=True) if m], skip_special_tokens=True)
        read = tok.decode([t for t, m in zip(ids, mask, strict=True) if not m])
        assert written == ("badgood" if i == 0 else "badstill bad")  # both turns carry gradient
        assert feedback(None) in read  # the verdict is read, never trained on
        assert contexts[1][i] == out["prompt_ids"][i] + ids[: len(contexts[1][i]) - len(out["prompt_ids"][i])]
    # the context is the conversation as the chat template renders it, turn after turn
    for i, answers in enumerate((["bad", "good"], ["bad", "still bad"])):
        conversation = [*prompts[i]]
        for answer, verdict in zip(answers, [feedback(None), None], strict=True):
            conversation.append({"role": "assistant", "content": answer})
            if verdict:
                conversation.append({"role": "user", "content": verdict})
        full = tok.apply_chat_template(conversation, tokenize=False)
        context = tok.decode(out["prompt_ids"][i] + out["completion_ids"][i])
        assert full.startswith(context) and context.endswith(tok.decode([eos]))
    # the reward terms other than total read the last turn's records, without a second evaluation
    texts = tok.batch_decode(out["completion_ids"], skip_special_tokens=True)
    assert [r and r.status for r in shared.records_for(texts, ["a", "b"])] == ["ok", None]
    assert len(source.calls) == 2
    assert trainer._metrics["train"]["turns/turn1/total_mean"] == [(ok + cfg.reward_no_code) / 2]


def test_trl_reports_to_wandb_only_into_an_open_run():
    from warpk.trainers.common import report_to

    assert report_to(config("logger=disabled")) == "none"
    assert report_to(config("logger=wandb_offline")) in ("none", "wandb")  # "wandb" only if a run is open


# --- energy only where it is used ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "energy", "reward_energy", "heldout_energy"),
    [
        ("m1", "auto", "none", "model"),  # M1's reward reads no energy: its completions skip it
        ("m2", "auto", "model", "model"),
        ("m3", "auto", "model", "model"),
        ("m1", "model", "model", "model"),  # asked for by the user: measured anyway
    ],
)
def test_the_reward_evaluator_measures_energy_only_when_the_reward_reads_it(
    model, energy, reward_energy, heldout_energy
):
    from warpk.trainers.common import build_evaluator

    cfg = config(f"model={model}", f"evaluate.energy={energy}")
    assert build_evaluator(cfg, for_reward=True).energy == reward_energy
    assert build_evaluator(cfg).energy == heldout_energy


def test_sft_steps_batch_and_rate_come_from_their_own_keys_where_the_preset_sets_them(tmp_path):
    small = config("policy=small")
    sft_args = common.trainer_args(small, tmp_path, sft=True)
    grpo_args = common.trainer_args(small, tmp_path)
    assert (sft_args["max_steps"], sft_args["per_device_train_batch_size"]) == (150, 4)
    assert sft_args["learning_rate"] == small.train.sft_learning_rate
    assert (grpo_args["max_steps"], grpo_args["per_device_train_batch_size"]) == (48, 16)
    assert grpo_args["learning_rate"] == small.train.learning_rate
    config("model=m1", "policy=small")  # composes: the recipe's GRPO batch holds whole groups
    smoke = common.trainer_args(config(), tmp_path, sft=True)  # unset: the shared keys
    assert (smoke["max_steps"], smoke["per_device_train_batch_size"]) == (2, 8)


def test_multiturn_heldout_evaluation_refines_each_sample_from_its_verdict(monkeypatch, tmp_path):
    from warpk.config import TasksConfig
    from warpk.tasks import load_suite
    from warpk.trainers import sample
    from warpk.trainers.multiturn import feedback

    tasks = load_suite(TasksConfig(subset=["01_softmax", "03_gelu_tanh"]))
    code = "```python\nclass ModelNew:\n    pass\n```"
    seen = []

    def scripted(model, tokenizer, messages, k, max_new_tokens, temperature):
        seen.append(messages)
        refining = any(m["role"] == "assistant" for m in messages)
        return [code] if refining else ["no code here"] * k  # turn 0 fails, turn 1 fixes it

    class Evaluator:
        def evaluate_many(self, items):
            return [_record(item.task.task_id, "ok", 0, speedup=1.5) for item in items]

    monkeypatch.setattr(sample, "sample_completions", scripted)
    class Model:
        def eval(self):
            pass

    records, summary = sample.evaluate_policy(
        Model(), None, tasks, Evaluator(), 2, 8, 1.0, "cpu", 0, tmp_path / "records.jsonl", turns=2
    )
    assert [r.status for r in records] == ["ok"] * 4  # the last turn's answers
    assert [r.sample for r in records] == [0, 1, 0, 1]
    assert summary["turn0/correct_rate"] == 0.0 and summary["turn1/correct_rate"] == 1.0
    assert summary["correct_rate"] == 1.0 and summary["pass_at_1"] == 1.0
    refined = [m for m in seen if any(x["role"] == "assistant" for x in m)]
    assert len(refined) == 4  # one continuation per sample
    assert refined[0][-2] == {"role": "assistant", "content": "no code here"}
    assert refined[0][-1] == {"role": "user", "content": feedback(None)}  # the message training sends
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 4


def test_multiturn_rollout_keeps_the_template_when_a_turn_is_empty(tmp_path):
    from warpk.config import RewardConfig
    from warpk.policy import load_policy
    from warpk.rewards import SharedBatch
    from warpk.trainers.multiturn import MultiTurnRollout, feedback, prompt_key

    _, tok = load_policy(PolicyConfig(), tmp_path)
    prompts = [[{"role": "user", "content": "task A"}]]
    task_of = {prompt_key(prompts[0]): "a"}
    rollout = MultiTurnRollout(SharedBatch(_Scripted()), RewardConfig(), 2, 0.5, task_of)
    eos = tok.eos_token_id
    turns = iter([[eos], tok("good", add_special_tokens=False)["input_ids"] + [eos]])
    rollout.generate = lambda batch: [next(turns)]  # turn 0 is an eos alone: an empty answer
    out = rollout(prompts, _FakeTrainer(tok))
    conversation = [
        *prompts[0],
        {"role": "assistant", "content": ""},
        {"role": "user", "content": feedback(None)},
        {"role": "assistant", "content": "good"},
    ]
    full = tok.apply_chat_template(conversation, tokenize=False)
    assert full.startswith(tok.decode(out["prompt_ids"][0] + out["completion_ids"][0]))
    assert out["env_mask"][0][0] == 1  # the sampled eos is the policy's


def test_negative_advantages_are_scaled_after_trl_computes_them(monkeypatch):
    """train.negative_advantage_weight: the better completions of a group keep their advantage,
    the worse ones keep a share of theirs; 1 is trl's own trainer, untouched."""
    import torch
    from trl import GRPOTrainer

    from warpk.trainers.grpo import trainer_class

    assert trainer_class(1.0) is GRPOTrainer
    batch = {"advantages": torch.tensor([1.0, -2.0, 0.5, -0.5, 0.0])}
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", lambda self, inputs: dict(batch))
    cls = trainer_class(0.1)
    out = cls._generate_and_score_completions(object.__new__(cls), inputs=[])
    assert torch.allclose(out["advantages"], torch.tensor([1.0, -0.2, 0.5, -0.05, 0.0]))
    assert config("policy=small").train.negative_advantage_weight == 0.1  # small_cpu's recipe
    assert config("policy=small").train.credit_cutoff == 0.5 and config().train.credit_cutoff is None
    assert config().train.negative_advantage_weight == 1.0  # plain GRPO elsewhere


def test_credit_stops_at_a_completions_first_slip():
    """train.credit_cutoff: a worse completion is charged up to and including its first token
    sampled below the cutoff, a better one credited before it; no slip keeps every token, and
    padding stays out."""
    import torch

    from warpk.trainers.grpo import credit_mask

    probs = torch.tensor([[0.9, 0.2, 0.9, 0.1, 0.9]] * 2 + [[0.9] * 5] + [[0.9, 0.9, 0.3, 0.9, 0.9]])
    mask = torch.tensor([[1, 1, 1, 1, 1]] * 2 + [[1, 1, 1, 1, 0]] + [[1, 1, 1, 1, 1]])
    keep = credit_mask(probs, mask, torch.tensor([-1.0, 1.0, -1.0, 0.0]), cutoff=0.5)
    assert keep.tolist() == [[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]


def test_the_credit_mask_reaches_trls_loss_mask(monkeypatch):
    """The trainer puts credit_mask into trl's tool_mask, from the policy's own probabilities of
    the completion tokens (prompt and completion fed in one pass, only the completion's kept). A
    token a multi-turn rollout masked out (feedback, env_mask 0) is never a slip, however
    unlikely, and stays out of the loss."""
    import torch
    from trl import GRPOTrainer

    from warpk.trainers.grpo import trainer_class

    batch = {
        "prompt_ids": torch.tensor([[1, 2, 3], [4, 5, 6]]),
        "prompt_mask": torch.ones(2, 3, dtype=torch.long),
        "completion_ids": torch.tensor([[7, 8, 9, 10], [11, 12, 13, 0]]),
        "completion_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        "tool_mask": torch.tensor([[1, 0, 1, 1], [1, 1, 1, 1]]),  # row 0: token 1 is feedback
        "advantages": torch.tensor([-1.0, 1.0]),
    }
    probs = torch.tensor([[0.9, 0.01, 0.9, 0.1], [0.9, 0.2, 0.9, 0.9]])
    seen = {}

    def forward(model, ids, attention, keep, **kwargs):
        seen.update(ids=ids, attention=attention, keep=keep, grad=torch.is_grad_enabled())
        return probs.log(), None, None

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", lambda self, inputs: dict(batch))
    cls = trainer_class(1.0, credit_cutoff=0.5)
    trainer = object.__new__(cls)
    trainer.model = type("Policy", (), {"is_gradient_checkpointing": False})()
    trainer.args = type("Args", (), {"gradient_checkpointing_kwargs": None, "per_device_train_batch_size": 2})
    trainer._get_per_token_logps_and_entropies = forward
    out = cls._generate_and_score_completions(trainer, inputs=[])
    assert out["tool_mask"].tolist() == [[1, 0, 1, 1], [1, 0, 0, 0]]
    assert seen["ids"].tolist() == [[1, 2, 3, 7, 8, 9, 10], [4, 5, 6, 11, 12, 13, 0]]
    assert seen["attention"].tolist() == [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 0]]
    assert seen["keep"] == 4 and not seen["grad"]
    assert torch.equal(out["advantages"], batch["advantages"])  # weight 1: advantages untouched


