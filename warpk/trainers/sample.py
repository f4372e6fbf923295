"""Evaluate a policy: sample k completions per task, evaluate them, report pass@k and friends.

Used by `stage=evaluate policy.checkpoint=DIR` and at the end of every `stage=train` run (on the
held-out split). Each completion becomes one `EvalRecord` with `sample` = its index among the k
of its task. A completion without a fenced python block defining `ModelNew` is not sent to the
evaluator: its record says `static_reject` with the reason "no code", exactly what the
evaluator's static check says of a source without ModelNew.

Metrics (fractions over all k x tasks completions unless said otherwise):
  compile_rate, correct_rate, fast_1, geomean_speedup: `warpk.records.summarize`;
  pass_at_1, pass_at_k: the unbiased estimator of Chen et al. 2021 (HumanEval),
      pass@k = mean over tasks of 1 - C(n - c, k) / C(n, k), n samples of which c are ok;
  energy_ratio: geometric mean of ref_energy_j / energy_j over ok records, labelled by
      energy_source ("model" on the CPU: modelled, not measured).

With `turns` > 1 (`model.turns`), each of the k conversations is refined as in training: the
evaluator's verdict goes back as a user message (`multiturn.feedback`) and the policy answers
again, `turns` times in all. records.jsonl holds each conversation's LAST answer (what a user gets
after that many turns); the summary adds `turn<t>/correct_rate` and `turn<t>/pass_at_1` for
every turn, so single-shot and multi-turn inference are compared on the same samples.

Non-goals: no training; no tables (the stages print them).
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from pathlib import Path

from warpk.config import RunConfig
from warpk.evaluator import Evaluator
from warpk.policy import build_prompt
from warpk.policy.completions import score_completions
from warpk.records import EvalRecord, summarize, write_records
from warpk.tasks import Task

NO_CODE = "no code: the completion has no fenced python block defining class ModelNew"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def sample_completions(
    model, tokenizer, messages: list[dict], k: int, max_new_tokens: int, temperature: float
):
    """k completions (text, special tokens dropped) of the chat prompt `messages`."""
    import torch

    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    enc = tokenizer(text, return_tensors="pt").to(model.device)
    sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
    with torch.no_grad():
        out = model.generate(
            **enc,
            max_new_tokens=max_new_tokens,
            num_return_sequences=k,
            pad_token_id=tokenizer.pad_token_id,
            **sampling,
        )
    prompt_tokens = enc["input_ids"].shape[1]
    return [tokenizer.decode(row[prompt_tokens:], skip_special_tokens=True) for row in out]


def no_code_record(task: Task, completion: str, sample: int, hardware: str) -> EvalRecord:
    return EvalRecord(
        task_id=task.task_id,
        candidate=f"sample{sample}",
        candidate_sha=hashlib.sha256(completion.encode()).hexdigest(),
        status="static_reject",
        error=NO_CODE,
        hardware=hardware,
        sample=sample,
    )


def evaluate_samples(
    completions: dict[str, list[str]], tasks: list[Task], evaluator: Evaluator, hardware: str
) -> list[EvalRecord]:
    """Records of every completion (task order, then sample order); ONE evaluate_many call."""
    by_id = {t.task_id: t for t in tasks}
    entries = [(by_id[task_id], text, j) for task_id, texts in completions.items()
               for j, text in enumerate(texts)]  # fmt: skip
    records = score_completions(evaluator, [(task, text, f"sample{j}") for task, text, j in entries])
    return [
        no_code_record(task, text, j, hardware) if record is None else _with_sample(record, j)
        for record, (task, text, j) in zip(records, entries, strict=True)
    ]


def _verdict(record: EvalRecord) -> EvalRecord | None:
    """What the feedback message reports: None for a completion without code, as in training."""
    return None if record.error == NO_CODE else record


def _with_sample(record: EvalRecord, sample: int) -> EvalRecord:
    import dataclasses

    return dataclasses.replace(record, sample=sample)


def policy_metrics(records: list[EvalRecord], k: int) -> dict:
    """The summary of a policy evaluation: summarize() + pass@1, pass@k, energy_ratio + labels."""
    summary = summarize(records)
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        per_task[r.task_id].append(r.status == "ok")
    n_tasks = len(per_task)
    for name, kk in (("pass_at_1", 1), ("pass_at_k", k)):
        values = [pass_at_k(len(oks), sum(oks), kk) for oks in per_task.values() if len(oks) >= kk]
        summary[name] = sum(values) / len(values) if values and len(values) == n_tasks else None
    summary["pass_k"] = float(k)
    summary["energy_ratio"] = summary["geomean_energy_ratio"]
    sources = sorted({r.energy_source for r in records if r.energy_j is not None})
    summary["energy_source"] = "+".join(sources) or "none"
    return summary


def evaluate_policy(
    model,
    tokenizer,
    tasks: list[Task],
    evaluator: Evaluator,
    k: int,
    max_new_tokens: int,
    temperature: float,
    hardware: str,
    seed: int,
    records_path: Path,
    turns: int = 1,
) -> tuple[list[EvalRecord], dict]:
    """Sample k completions per task (refined `turns` times), evaluate, write records.jsonl;
    returns (records, summary)."""
    import torch

    from warpk.trainers.multiturn import feedback

    torch.manual_seed(seed)
    model.eval()
    prompts = {t.task_id: build_prompt(t, hardware) for t in tasks}
    completions = {
        task_id: sample_completions(model, tokenizer, messages, k, max_new_tokens, temperature)
        for task_id, messages in prompts.items()
    }
    conversations = {task_id: [list(messages) for _ in range(k)] for task_id, messages in prompts.items()}
    records = evaluate_samples(completions, tasks, evaluator, hardware)
    by_turn = [policy_metrics(records, k)]
    for _ in range(1, turns):
        verdicts = iter(records)  # task order, then sample order, as evaluate_samples returns them
        for task_id, texts in completions.items():
            for conversation, text in zip(conversations[task_id], texts, strict=True):
                conversation += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": feedback(_verdict(next(verdicts)))},
                ]
            completions[task_id] = [
                sample_completions(model, tokenizer, c, 1, max_new_tokens, temperature)[0]
                for c in conversations[task_id]
            ]
        records = evaluate_samples(completions, tasks, evaluator, hardware)
        by_turn.append(policy_metrics(records, k))
    write_records(records_path, records)
    summary = dict(by_turn[-1])
    if turns > 1:
        for t, metrics in enumerate(by_turn):
            summary[f"turn{t}/correct_rate"] = metrics["correct_rate"]
            summary[f"turn{t}/pass_at_1"] = metrics["pass_at_1"]
    return records, summary


def evaluate_checkpoint(config: RunConfig, run_dir: Path) -> tuple[list[EvalRecord], dict]:
    """policy.checkpoint=DIR: the policy trained in DIR (LoRA adapter or full), train.samples_per_task
    completions per selected task, evaluated; (records, summary) with the arm that trained it."""
    from warpk.tasks import TaskError, load_suite
    from warpk.trainers.checkpoints import check_checkpoint, load_trained
    from warpk.trainers.common import build_evaluator, cache_dir, corpus_root

    tasks = load_suite(config.tasks)
    if not tasks:
        raise TaskError(
            f"no tasks selected (tasks.split={config.tasks.split}, tasks.subset={config.tasks.subset})"
        )
    model, tokenizer = load_trained(config.policy, Path(config.policy.checkpoint), cache_dir(config),
                                    corpus_root=corpus_root(config))
    if config.hardware.device == "cuda":
        model = model.to("cuda")
    k = config.train.samples_per_task
    records, summary = evaluate_policy(
        model,
        tokenizer,
        tasks,
        build_evaluator(config),
        k,
        config.policy.max_new_tokens,
        config.policy.temperature,
        config.hardware.name,
        config.seed,
        run_dir / "records.jsonl",
        turns=config.model.turns,
    )
    # which arm trained the policy (its stamp): reports label the run with it, never pooling
    # an M1 adapter's samples with an M3 one's
    summary["trained_arm"] = check_checkpoint(config.policy).get("arm")
    return records, summary
