"""Prompt and solution lengths, in tokens of an in-process policy's tokenizer, on the train split.

    python benchmarks/policy_tokens.py --policy small      # docs/training.md quotes its output

Prints min / mean / max of the chat-formatted prompt (generation prompt included) and of each
torch solution in the answer format (fenced), the lengths that decide `max_new_tokens` and the
cost of a training step.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.config import PolicyConfig, TasksConfig  # noqa: E402
from warpk.evaluator.static import candidate_backend  # noqa: E402
from warpk.policy import build_prompt, build_tiny_policy  # noqa: E402
from warpk.tasks import load_suite  # noqa: E402
from warpk.trainers.data import fenced, prompt_length  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--policy", choices=["tiny", "small"], default="small")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    shape = {"small": {"hidden_size": 128, "num_hidden_layers": 4}, "tiny": {}}[args.policy]
    folder = build_tiny_policy(PolicyConfig(name=args.policy, **shape), Path(tempfile.mkdtemp()))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tasks = load_suite(dataclasses.replace(TasksConfig(), split="train"))
    prompts = [prompt_length(tokenizer, build_prompt(t, "cpu")) for t in tasks]
    solutions = [
        len(tokenizer(fenced(p.read_text()))["input_ids"])
        for t in tasks
        for p in t.solutions
        if candidate_backend(p.read_text()) == "torch"
    ]
    for name, values in (("prompt", prompts), ("solution", solutions)):
        print(f"{args.policy} {name} tokens: min {min(values)} mean {statistics.mean(values):.0f} "
              f"max {max(values)} (n={len(values)})")  # fmt: skip


if __name__ == "__main__":
    main()
