"""What ONE optimizer step does to a trained policy=small model, measured on the reference solutions.

The question behind it (docs/training.md, "Does it learn?"): GRPO on top of M0 raised the
policy's entropy after its first update in every recipe tried. Is that the size of the step
(the model sits in a sharp minimum any step of that size leaves), or the direction of GRPO's
gradient? This probe takes the step in the most benign direction there is, the SFT gradient of
the train split's own reference solutions, with several optimizers, and reports per completion
token, teacher-forced at the policy's temperature: the entropy, the negative log-likelihood of
the reference token and the share of positions whose argmax is the reference token.

    python benchmarks/probe_step.py --adapter <M0 run>/adapter [--tasks 01_softmax 03_gelu_tanh ...]

Nothing is sampled or evaluated; on 2 cores it takes ~20 s.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_learning import TASKS  # noqa: E402

STEPS = {  # name -> optimizer factory: the GRPO learning rates the recipes used, and SGD's
    "sgd lr=0.1": lambda torch, params: torch.optim.SGD(params, lr=0.1),
    "sgd lr=1.0": lambda torch, params: torch.optim.SGD(params, lr=1.0),
    "adamw lr=2e-4": lambda torch, params: torch.optim.AdamW(params, lr=2e-4, weight_decay=0.0),
    "adamw lr=5e-4": lambda torch, params: torch.optim.AdamW(params, lr=5e-4, weight_decay=0.0),
    "adamw lr=1e-3": lambda torch, params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0),
}


def reference_batch(adapter: Path, tasks: list[str], cache_dir: Path):
    """(model, [(token ids, prompt length)]) of the adapter's model and each task's solution."""
    import torch

    from warpk.__main__ import compose_config
    from warpk.trainers.checkpoints import load_trained
    from warpk.trainers.data import sft_rows, train_tasks

    overrides = ["model=m1", "policy=small", "hardware=cpu", "logger=disabled",
                 f"tasks.subset=[{','.join(tasks)}]", f"evaluate.cache_dir={cache_dir}"]  # fmt: skip
    cfg = compose_config(overrides, [])
    model, tok = load_trained(cfg.policy, adapter, cache_dir, dtype=torch.float32, trainable=True)
    batch = []
    for row in sft_rows(cfg, train_tasks(cfg), tok):
        prompt = tok(tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True))
        full = tok(tok.apply_chat_template(row["prompt"] + row["completion"], tokenize=False))
        if full["input_ids"][: len(prompt["input_ids"])] != prompt["input_ids"]:
            raise SystemExit(f"{row['task_id']}: the prompt's tokens are not a prefix of prompt + solution")
        batch.append((torch.tensor([full["input_ids"]]), len(prompt["input_ids"])))
    return model, batch, cfg.policy.temperature


def token_logprobs(model, ids, prompt_len: int, temperature: float):
    """(log-probabilities over the vocabulary, reference tokens) at each solution position."""
    logits = model(ids).logits[0, prompt_len - 1 : -1] / temperature
    return logits.log_softmax(-1), ids[0, prompt_len:]


def measure(model, batch, temperature: float) -> dict:
    import torch

    entropy = nll = hits = tokens = 0.0
    with torch.no_grad():
        for ids, prompt_len in batch:
            logp, target = token_logprobs(model, ids, prompt_len, temperature)
            entropy += -(logp.exp() * logp).sum().item()
            nll += -logp.gather(1, target[:, None]).sum().item()
            hits += (logp.argmax(-1) == target).sum().item()
            tokens += len(target)
    return {"entropy": entropy / tokens, "nll": nll / tokens, "argmax_acc": hits / tokens}


def one_step(model, batch, temperature: float, make) -> tuple[float, dict]:
    """(gradient norm, measures after) of one step on the mean token NLL of the solutions."""
    import torch

    model = copy.deepcopy(model)
    optimizer = make(torch, model.parameters())
    optimizer.zero_grad()
    loss, tokens = 0.0, 0
    for ids, prompt_len in batch:
        logp, target = token_logprobs(model, ids, prompt_len, temperature)
        loss = loss - logp.gather(1, target[:, None]).sum()
        tokens += len(target)
    (loss / tokens).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item()
    optimizer.step()
    return norm, measure(model, batch, temperature)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--adapter", type=Path, required=True, help="an M0 run's adapter/ (policy=small)")
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/warpk-probe-cache"))
    args = parser.parse_args()
    import torch

    torch.manual_seed(0)
    model, batch, temperature = reference_batch(args.adapter, args.tasks, args.cache_dir)
    print(f"{args.adapter}: {len(batch)} reference solutions, temperature {temperature}")
    print("| step | gradient norm | entropy / token | NLL / token | argmax = reference |")
    print("|---|---|---|---|---|")
    m = measure(model, batch, temperature)
    print(f"| none (M0) | | {m['entropy']:.4f} | {m['nll']:.4f} | {m['argmax_acc']:.3f} |")
    for name, make in STEPS.items():
        norm, m = one_step(model, batch, temperature, make)
        print(f"| {name} | {norm:.4f} | {m['entropy']:.4f} | {m['nll']:.4f} | {m['argmax_acc']:.3f} |")


if __name__ == "__main__":
    main()
