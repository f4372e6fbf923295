"""A screen, not a claim: how often a trained policy's completions on a generated suite are right,
per split (train, heldout, heldout_pair), judged in this process by the evaluator's correctness
rule (warpk.evaluator.inprocess: the completions run unsandboxed, so only on a machine where the
policy is ours). It exists to choose the design of the learning run (issue: task data at RL
scale) before that run; the run itself is benchmarks/bench_learning.py --suite synthetic, through
the sandboxed evaluator.

    python benchmarks/screen_synthetic_policy.py --adapter RUN/adapter --suite FOLDER \
        --tasks 20 --k 4 --temperature 0.8 --out DIR

Per split: `--tasks` tasks drawn with a fixed seed, `--k` samples each; the share whose extracted
code passes, and the most common reasons it does not. Writes DIR/screen.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.evaluator.inprocess import check_solution  # noqa: E402
from warpk.policy.prompt import build_prompt, extract_code  # noqa: E402
from warpk.tasks import load_task_file  # noqa: E402


def screen(model, tok, tasks: list, k: int, temperature: float) -> dict:
    import torch

    ok, total, reasons = 0, 0, Counter()
    for task in tasks:
        text = tok.apply_chat_template(build_prompt(task, "cpu"), add_generation_prompt=True, tokenize=False)
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**ids, do_sample=True, temperature=temperature, max_new_tokens=384,
                                 num_return_sequences=k, pad_token_id=tok.pad_token_id)
        problem = task.path.read_text()
        for seq in out:
            code = extract_code(tok.decode(seq[ids["input_ids"].shape[1]:], skip_special_tokens=True))
            why = "no code block" if code is None else check_solution(problem, code)
            total += 1
            ok += why is None
            if why is not None:
                reasons[why.split(":")[0][:60]] += 1
    return {"tasks": len(tasks), "k": k, "samples": total, "correct": ok, "correct_rate": ok / max(total, 1),
            "top_reasons": reasons.most_common(5)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", type=Path, required=True, help="a trained policy=small run's adapter/")
    p.add_argument("--suite", type=Path, required=True, help="a generated suite's folder (manifest.json)")
    p.add_argument("--tasks", type=int, default=20)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(args.adapter)
    model = AutoModelForCausalLM.from_pretrained(args.adapter).eval()
    tasks = [load_task_file(path, "synthetic") for path in sorted((args.suite / "problems").glob("*.py"))]
    result = {"date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv), "splits": {}}
    for split in ("train", "heldout", "heldout_pair"):
        chosen = [t for t in tasks if t.split == split]
        random.Random(args.seed).shuffle(chosen)
        result["splits"][split] = row = screen(model, tok, chosen[:args.tasks], args.k, args.temperature)
        print(f"{split}: {row['correct']}/{row['samples']} correct ({row['correct_rate']:.3f}); "
              f"{row['top_reasons']}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
