"""Does trl's GRPOTrainer let the evaluator work while the next batch is generated? (issue #31 item 3)

A measurement, not a feature: the tiny policy on the CPU, 4 optimizer steps per variant, two
reward functions as warpk.rewards gives trl (one per reward term, sharing one evaluation: the
first sleeps `--reward-s`, a stand-in for `evaluate_many`; the second reads what it left) and a
generation padded by `--generate-s` (so generation costs about what the evaluator does). Every
generation, reward call and optimizer step is timestamped on one clock, and the table says which
of them ever ran at the same time.

Variants:
  sync      two plain reward functions (what warpk.rewards gives trl today)
  async     the same as coroutines: trl 1.16 gathers them on its own event loop (the second
            waits for the first's evaluation, as a shared batch would)
  spg2      sync with steps_per_generation=2: one generation batch serves two optimizer steps
  stale     a prototype subclass (here only, never used for training) whose rewards of batch k
            run on a thread while batch k+1 is generated and batch k-1 trained: one update stale,
            the overlap trl itself does not offer. Step 0 trains on zero advantages; nothing here
            checks that it learns, only what it would save.

    python benchmarks/probe_reward_overlap.py --out docs/data/reward-overlap-cpu-2026-12-05

Writes `probe_reward_overlap.json` (events per variant) and prints a table. Needs trl and the
tiny policy's build (no download).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

STEPS = 4


class Clock:
    """Events (name, start_s, end_s) on one perf_counter origin."""

    def __init__(self):
        self.origin, self.events = time.perf_counter(), []

    def span(self, name: str, start: float) -> None:
        self.events.append((name, start - self.origin, time.perf_counter() - self.origin))


def reward_functions(clock: Clock, reward_s: float, coroutine: bool) -> list:
    """`evaluate` pays for the batch's evaluation; `term` reads it (warpk.rewards.SharedBatch)."""
    evaluated: dict[int, asyncio.Event] = {}  # the k-th batch's evaluation is done
    calls = {"evaluate": 0, "term": 0}

    def make(name: str, cost_s: float):
        if coroutine:
            async def reward(prompts, completions, **_):
                start = time.perf_counter()
                calls[name] += 1
                done = evaluated.setdefault(calls[name], asyncio.Event())
                if cost_s:
                    await asyncio.sleep(cost_s)
                    done.set()
                await done.wait()
                clock.span(name, start)
                return [float(len(c)) for c in completions]
        else:
            def reward(prompts, completions, **_):
                start = time.perf_counter()
                time.sleep(cost_s)
                clock.span(name, start)
                return [float(len(c)) for c in completions]
        reward.__name__ = name
        return reward

    return [make("evaluate", reward_s), make("term", 0.0)]


def trainer_classes(clock: Clock, generate_s: float):
    import torch
    from trl import GRPOTrainer

    class Timed(GRPOTrainer):
        def _generate(self, prompts):
            start = time.perf_counter()
            out = super()._generate(prompts)
            time.sleep(generate_s)
            clock.span("generate", start)
            return out

    class Stale(Timed):
        """Rewards of batch k on a thread while batch k+1 is generated (one process, one
        generation per optimizer step). Old log-probs are kept from the sampling policy so trl's
        clipped ratio sees the lag."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.pool, self.waiting, self.future = ThreadPoolExecutor(1), None, None

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            self.future = self.pool.submit(super()._calculate_rewards, inputs, prompts, completions,
                                           completion_ids_list)
            return torch.zeros(len(prompts), len(self.reward_funcs))

        def _prepare_inputs(self, generation_batch):
            if not self.model.training:
                return super()._prepare_inputs(generation_batch)
            batch = self._generate_and_score_completions(generation_batch)
            if batch.get("old_per_token_logps") is None:
                ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
                mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
                with torch.no_grad():
                    batch["old_per_token_logps"], _, _ = self._get_per_token_logps_and_entropies(
                        self.model, ids, mask, batch["completion_ids"].size(1), batch_size=len(ids))
            previous, self.waiting = self.waiting, (batch, self.future)
            if previous is None:
                return batch  # zero advantages: the pipeline's first step trains nothing
            old, future = previous
            rewards = (future.result() * self.reward_weights.unsqueeze(0)).nansum(dim=1)
            groups = rewards.view(-1, self.num_generations)
            old["advantages"] = ((groups - groups.mean(dim=1, keepdim=True))
                                 / (groups.std(dim=1, keepdim=True) + 1e-4)).view(-1)
            return old

    return Timed, Stale


def run_variant(name: str, model_dir: Path, work: Path, reward_s: float, generate_s: float) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig

    clock = Clock()
    timed, stale = trainer_classes(clock, generate_s)

    class OptimizerSpans(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_optimizer_step(self, args, state, control, **kwargs):
            clock.span("optimizer", self.start)

    args = GRPOConfig(
        output_dir=str(work / name), max_steps=STEPS, per_device_train_batch_size=4,
        gradient_accumulation_steps=1, num_generations=4, max_completion_length=16,
        learning_rate=1e-4, logging_steps=1, report_to="none", save_strategy="no", use_cpu=True,
        disable_tqdm=True, seed=0, **({"steps_per_generation": 2} if name == "spg2" else {}),
    )
    cls = stale if name == "stale" else timed
    trainer = cls(model=AutoModelForCausalLM.from_pretrained(model_dir), args=args,
                  reward_funcs=reward_functions(clock, reward_s, coroutine=name == "async"),
                  train_dataset=Dataset.from_dict({"prompt": [f"def kernel_{i}(x):" for i in range(64)]}),
                  processing_class=AutoTokenizer.from_pretrained(model_dir), callbacks=[OptimizerSpans()])
    trainer.log = lambda logs, start_time=None: None
    start = time.perf_counter()
    trainer.train()
    wall_s = time.perf_counter() - start
    events = sorted(clock.events, key=lambda e: e[1])
    overlaps = sorted({tuple(sorted((a[0], b[0]))) for i, a in enumerate(events) for b in events[i + 1:]
                       if b[1] < a[2] - 1e-3})
    return {"variant": name, "wall_s": wall_s, "steps": STEPS, "events": events,
            "overlapping": [list(pair) for pair in overlaps]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reward-s", type=float, default=1.0)
    parser.add_argument("--generate-s", type=float, default=1.0)
    parser.add_argument("--variants", nargs="+", default=["sync", "async", "spg2", "stale"])
    args = parser.parse_args(argv)
    import torch
    import trl

    from warpk.config.groups import PolicyConfig
    from warpk.policy.tiny import build_tiny_policy

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="warpk-overlap-") as tmp:
        tiny = PolicyConfig(name="tiny", hidden_size=64, num_hidden_layers=2)
        model_dir = build_tiny_policy(tiny, Path(tmp))
        rows = [run_variant(v, model_dir, Path(tmp), args.reward_s, args.generate_s) for v in args.variants]
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"trl": trl.__version__, "torch": torch.__version__, "reward_s": args.reward_s,
            "generate_s": args.generate_s, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    (args.out / "probe_reward_overlap.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"trl {trl.__version__}: {STEPS} optimizer steps, an evaluation of {args.reward_s} s a batch, "
          f"generation +{args.generate_s} s")
    print(f"{'variant':8s} {'wall':>8s} {'per step':>9s}  what ran at the same time")
    for row in rows:
        pairs = ", ".join("+".join(p) for p in row["overlapping"]) or "nothing"
        print(f"{row['variant']:8s} {row['wall_s']:7.2f}s {row['wall_s'] / STEPS:8.2f}s  {pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
