"""GRPO training cost of the Qwen2.5-Coder-1.5B and -7B ARCHITECTURES with LoRA, group size 8.

Weights cannot be downloaded on the benchmark machines, so each model is built with RANDOM
INITIALISATION from the architecture's real config numbers (same shapes, same FLOPs, same memory
as the released weights), in bf16, and written to a local Hugging Face hub-cache folder
(`models--Qwen--Qwen2.5-Coder-<size>-Instruct/snapshots/<rev>/`). It is then loaded through the
project's own path: `warpk.policy.load_policy` with WARPK_HF_CACHE pointing at that folder and
WARPK_HF_LOCAL_FILES_ONLY=1, and trained by `warpk.trainers.grpo.build_trainer` (trl
GRPOTrainer, LoRA from the policy preset, rewards from the real evaluator). The tokenizer is the
tiny policy's BPE padded with added (non-special) tokens up to the model's vocabulary size, so
every sampled id decodes. The random model writes no code: every completion gets the no-code
tier, so the evaluator never runs and the figures are the trainer's own cost.

Measured per size: wall time of each GRPO optimizer step (generation + reward + loss + update;
the first step is warm-up and left out of the mean), generation tokens/s (completion tokens
sampled / wall time of `generate`, CUDA-synchronised), and peak GPU memory allocated.

    python benchmarks/bench_grpo.py --out results/ [--sizes 1.5b 7b --steps 3 --completion-tokens 256]
    python benchmarks/bench_grpo.py --tiny --out /tmp/bench   # CPU smoke test: tiny architecture, 1 step

Writes bench_grpo.json and bench_grpo.md to --out.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.config import (  # noqa: E402
    EvaluateConfig,
    HardwareConfig,
    LoggerConfig,
    ModelConfig,
    PolicyConfig,
    RewardConfig,
    RunConfig,
    TrainConfig,
)

CONF = Path(__file__).resolve().parents[1] / "conf"
NOTE = (
    "RANDOM INITIALISATION of the real architecture (weights cannot be downloaded here): "
    "same shapes and compute as the released model, nonsense completions"
)
# From the models' config.json on the Hugging Face hub (Qwen/Qwen2.5-Coder-{1.5B,7B}-Instruct).
ARCHS = {
    "1.5b": {
        "preset": "qwen2.5-coder-1.5b",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "7b": {
        "preset": "qwen2.5-coder-7b",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
    "tiny": {  # --tiny: the same path at toy size, for CPU tests
        "preset": "qwen2.5-coder-1.5b",
        "hf_id": "warpk-bench/Qwen2-tiny-random",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 2048,
        "tie_word_embeddings": True,
    },
}
COMMON = {"max_position_embeddings": 32768, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6}


def _load_yaml(group: str, name: str) -> dict:
    """A preset's own keys (its Hydra defaults list, e.g. the train preset it picks, left out)."""
    raw = yaml.safe_load((CONF / group / f"{name}.yaml").read_text())
    raw.pop("defaults", None)
    return raw


def policy_for(size: str, completion_tokens: int) -> PolicyConfig:
    arch = ARCHS[size]
    raw = _load_yaml("policy", arch["preset"])
    raw.update(max_new_tokens=completion_tokens, temperature=1.0)
    if "hf_id" in arch:
        raw["hf_id"] = arch["hf_id"]
    return PolicyConfig(**raw)


def hardware_for(device: str) -> HardwareConfig:
    raw = _load_yaml("hardware", "h200" if device == "cuda" else "cpu")
    raw.pop("clock_profiles", None)
    return HardwareConfig(**raw)


def padded_tokenizer(vocab_size: int, tiny_cache: Path):
    """The tiny policy's tokenizer with added tokens up to `vocab_size` (every id decodes)."""
    from transformers import AutoTokenizer

    from warpk.policy import build_tiny_policy

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_policy(PolicyConfig(), tiny_cache))
    tokenizer.add_tokens([f"<|rand{i}|>" for i in range(vocab_size - len(tokenizer))])
    assert len(tokenizer) == vocab_size, (len(tokenizer), vocab_size)
    return tokenizer


def write_random_model(size: str, policy: PolicyConfig, hf_cache: Path, device: str) -> dict:
    """Build the architecture with random weights (bf16) into the hub-cache layout; returns timings."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    arch = {k: v for k, v in ARCHS[size].items() if k not in ("preset", "hf_id")}
    tokenizer = padded_tokenizer(arch["vocab_size"], hf_cache / "tiny")
    config = Qwen2Config(
        **arch,
        **COMMON,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    revision = hashlib.sha1(json.dumps(arch, sort_keys=True).encode()).hexdigest()
    repo = hf_cache / ("models--" + policy.hf_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    start = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    params = sum(p.numel() for p in model.parameters())
    init_s = time.perf_counter() - start
    start = time.perf_counter()
    model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    save_s = time.perf_counter() - start
    del model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"params": params, "init_s": init_s, "save_s": save_s}


def run_config(policy: PolicyConfig, device: str, steps: int, work: Path, prompts: int = 1) -> RunConfig:
    return RunConfig(
        stage="train",
        seed=0,
        model=ModelConfig(name="m1", trainer="grpo"),
        policy=policy,
        reward=RewardConfig(**_load_yaml("reward", "kernel")),
        hardware=hardware_for(device),
        logger=LoggerConfig(mode="disabled"),
        evaluate=EvaluateConfig(cache_dir=str(work / "eval-cache"), energy="none"),
        train=TrainConfig(
            max_steps=steps,
            per_device_batch_size=8 * prompts,  # one generation batch of `prompts` groups of 8
            num_generations=8,
            save_steps=10_000,
            resume=False,
            heldout_eval=False,
        ),
    )


class _GenerateTimer:
    """Wraps the trainer's `_generate_single_turn` (every generator's path in trl): wall time
    (CUDA-synchronised) and completion tokens (up to and including EOS) per call."""

    def __init__(self, trainer, device: str, profile_to: Path | None = None, profile_call: int = 0) -> None:
        self.inner, self.device, self.calls = trainer._generate_single_turn, device, []
        self.profile_to, self.profile_call, self.seen = profile_to, profile_call, 0
        trainer._generate_single_turn = self

    def _sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def __call__(self, *args, **kwargs):
        self.seen += 1  # calls so far, the profiled one included
        if self.profile_to is not None and self.seen == self.profile_call:
            return self._profiled(*args, **kwargs)
        self._sync()
        start = time.perf_counter()
        completion_ids, logprobs = self.inner(*args, **kwargs)
        self._sync()
        tokens = sum(len(ids) for ids in completion_ids)
        end = time.perf_counter()
        self.calls.append({"s": end - start, "tokens": tokens, "sequences": len(completion_ids),
                           "start": start, "end": end})
        return completion_ids, logprobs


class _RewardTimer:
    """Wraps the evaluator source's `records_for` (the reward step's one evaluator call): when each
    call starts and ends on the same clock as the generate calls, so the report can say whether
    trl ever generates while the evaluator works (issue: evaluator throughput, item 3)."""

    def __init__(self, source) -> None:
        self.inner, self.calls = source.records_for, []
        source.records_for = self

    def __call__(self, completions, task_ids):
        start = time.perf_counter()
        try:
            return self.inner(completions, task_ids)
        finally:
            self.calls.append({"start": start, "end": time.perf_counter(), "completions": len(completions)})


def overlaps(generate: list[dict], reward: list[dict]) -> int:
    """Reward calls that overlap any generate call in time."""
    return sum(1 for r in reward if any(g["start"] < r["end"] and r["start"] < g["end"] for g in generate))

    def _profiled(self, *args, **kwargs):
        """This call under torch.profiler (CPU and CUDA): where a decode step's time goes. Its
        time is not counted (the profiler slows it); the tables go to `profile_to`."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device == "cuda" else [])
        self._sync()
        with profile(activities=activities) as prof:
            out = self.inner(*args, **kwargs)
            self._sync()
        events = prof.key_averages()
        by = "cuda_time_total" if self.device == "cuda" else "cpu_time_total"
        tables = [f"profile of generate call {self.profile_call}, torch {torch.__version__}"]
        for key in (by, "cpu_time_total"):
            tables.append(f"sorted by {key}:\n" + events.table(sort_by=key, row_limit=40))
        self.profile_to.write_text("\n\n".join(tables))
        return out


def step_timer(device: str):
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def _sync(self) -> None:
            if device == "cuda":
                import torch

                torch.cuda.synchronize()

        def on_step_begin(self, args, state, control, **kwargs):
            self._sync()
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self._sync()
            self.times.append(time.perf_counter() - self.start)

    return StepTimer()


def bench_size(size: str, device: str, steps: int, completion_tokens: int, work: Path,
               variants: list[tuple[str, int, bool]], profile_dir: Path | None = None):
    """Yields the result of every (generator, prompts per step, lean sampling) variant on one
    random model."""
    hf_cache = work / "hf"
    policy = policy_for(size, completion_tokens)
    built = write_random_model(size, policy, hf_cache, device)
    os.environ["WARPK_HF_CACHE"] = str(hf_cache)
    os.environ["WARPK_HF_LOCAL_FILES_ONLY"] = "1"
    try:
        for generator, prompts, lean in variants:
            print(f"bench_grpo: {size}: generator={generator}, lean_sampling={lean}, {prompts} prompt(s) "
                  f"x 8, {steps} step(s)...", flush=True)
            try:
                result = bench_variant(size, device, steps, work, policy, generator, prompts,
                                       profile_dir, lean)
            except Exception as error:  # one variant failing (e.g. compile) costs that row only
                result = {"size": size, "generator": generator, "prompts": prompts, "lean_sampling": lean,
                          "error": f"{type(error).__name__}: {str(error)[:300]}"}
            result.update(params=built["params"], init_s=built["init_s"], save_s=built["save_s"])
            yield result
    finally:
        shutil.rmtree(hf_cache, ignore_errors=True)


def bench_variant(size: str, device: str, steps: int, work: Path, policy: PolicyConfig, generator: str,
                  prompts: int, profile_dir: Path | None = None, lean: bool = True) -> dict:
    """One variant's figures; with profile_dir, one more step whose generation is profiled (and
    left out of every figure)."""
    import dataclasses

    import torch

    from warpk.trainers import common, grpo
    from warpk.trainers.data import train_tasks
    from warpk.trainers.source import EvaluatorSource

    policy = dataclasses.replace(policy, generator=generator, lean_sampling=lean)
    completion_tokens = policy.max_new_tokens
    config = run_config(policy, device, steps + (profile_dir is not None), work, prompts)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    source = EvaluatorSource(common.build_evaluator(config), train_tasks(config))
    # load_policy + LoRA + trl
    trainer = grpo.build_trainer(config, work / f"run-{generator}-{prompts}-{lean}", source)
    build_s = time.perf_counter() - start
    timer = step_timer(device)
    trainer.add_callback(timer)
    name = f"{size}_{generator}{'_lean' if lean else ''}_x{prompts}"
    profile_to = profile_dir / f"profile_{name}.txt" if profile_dir else None
    generate = _GenerateTimer(trainer, device, profile_to, profile_call=steps + 1)
    reward = _RewardTimer(source)
    trainer.train()
    if profile_dir is not None:
        timer.times = timer.times[:steps]  # the profiled step is not timed
    timed = timer.times[1:] or timer.times  # the first step warms up kernels, allocator, compile
    gen = generate.calls[1:] or generate.calls
    gen_tokens, gen_s = sum(c["tokens"] for c in gen), sum(c["s"] for c in gen)
    history = [h for h in trainer.state.log_history if "num_tokens" in h]
    result = {
        "size": size,
        "generator": generator,
        "prompts": prompts,
        # policy.lean_sampling asked for, and whether it applied (a bf16 policy under hf/hf-static)
        "lean_sampling": lean,
        "lean_sampling_applied": bool(getattr(type(trainer), "lean_sampling", False)),
        "hf_id": policy.hf_id,
        "arch": {k: v for k, v in ARCHS[size].items() if k != "preset"},
        "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
        "lora_r": policy.lora_r,
        "lora_targets": list(policy.target_modules),
        "group_size": config.train.num_generations,
        "completion_tokens": completion_tokens,
        "tokens_seen": [int(h["num_tokens"]) for h in history],  # trl: prompt + completion, cumulative
        "steps": len(timer.times),
        "step_s": timer.times,
        "step_mean_s": sum(timed) / len(timed),
        "generate_calls": generate.calls,
        # trl 1.16 scores a batch after generating it (and after the old/reference log-probs), and
        # trains on it before generating the next: no reward call overlaps a generate call
        "reward_calls": reward.calls,
        "reward_calls_overlapping_generation": overlaps(generate.calls, reward.calls),
        "reward_s": sum(c["end"] - c["start"] for c in reward.calls),
        "gen_tokens_per_s": gen_tokens / gen_s if gen_s else None,
        "first_generate_s": generate.calls[0]["s"] if generate.calls else None,
        # the last step's generation alone: hf-static's steady state once its shapes are compiled
        "last_gen_tokens_per_s": (
            generate.calls[-1]["tokens"] / generate.calls[-1]["s"] if generate.calls else None
        ),
        "decode_compile_allowed": not trainer.generation_config.disable_compile,  # hf-static only
        "peak_gpu_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
        "load_and_build_trainer_s": build_s,
        "profile": profile_to.name if profile_to else None,  # one more, untimed, profiled step
        "completions_no_code": source.counts.get("no_code", 0),
        "activation_checkpointing": bool(
            getattr(trainer.args, "activation_checkpointing", None) or trainer.args.gradient_checkpointing
        ),
    }
    del trainer, source, generate, reward
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch._dynamo.reset()  # the next variant compiles its own model
    return result


def label(result: dict) -> str:
    """The generator as run: `hf-static, lean` where lean sampling applied (policy.lean_sampling
    on, a bf16 policy, hf or hf-static)."""
    return result["generator"] + (", lean" if result.get("lean_sampling_applied") else "")


def markdown(report: dict) -> str:
    lines = [
        "# GRPO step cost (bench_grpo.py)",
        "",
        f"**{report['note']}.**",
        "",
        f"Device: {report['device']}; torch {report['torch']}, transformers {report['transformers']}, "
        f"trl {report['trl']}, peft {report['peft']}. Group size 8, LoRA from the policy preset, bf16 "
        "weights on a GPU (fp32 on the CPU). Step = generate + reward + loss + update; means over the "
        "steps after the first (the first warms up kernels, allocator and any compile: its generate "
        "time is the last column).",
        "",
        "| model | generator | prompts x 8 | completion tok | steps | step s (mean) | gen tok/s | "
        "gen tok/s, last step | peak GPU GiB | first generate s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        if "error" in r:
            error = r["error"].replace("|", "/")
            lines.append(f"| {r['size']} | {label(r)} | {r['prompts']} | failed: {error} |||||||")
            continue
        mem = "-" if r["peak_gpu_mem_gib"] is None else f"{r['peak_gpu_mem_gib']:.1f}"
        gen = "-" if r["gen_tokens_per_s"] is None else f"{r['gen_tokens_per_s']:.0f}"
        first = "-" if r["first_generate_s"] is None else f"{r['first_generate_s']:.1f}"
        last = "-" if r["last_gen_tokens_per_s"] is None else f"{r['last_gen_tokens_per_s']:.0f}"
        lines.append(
            f"| {r['size']} ({r['params'] / 1e6:,.0f} M) | {label(r)} | {r['prompts']} | "
            f"{r['completion_tokens']} | {r['steps']} | {r['step_mean_s']:.2f} | {gen} | "
            f"{last} | {mem} | {first} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--sizes", nargs="+", default=["1.5b", "7b"], choices=["1.5b", "7b"])
    parser.add_argument(
        "--steps", type=int, default=3, help="GRPO optimizer steps per size (first = warm-up)"
    )
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--generators", nargs="+", default=["hf"], choices=["hf", "hf-static", "hf-paged"],
                        help="policy.generator values to compare (vllm is not installed here)")
    parser.add_argument("--prompts", nargs="+", type=int, default=[1],
                        help="prompts per step (each a group of 8 completions, one generation batch)")
    parser.add_argument("--lean", nargs="+", default=["on"], choices=["on", "off"],
                        help="policy.lean_sampling values to compare (on: bf16 adapters and no "
                             "per-token host sync while sampling)")
    parser.add_argument("--tiny", action="store_true", help="tiny architecture, 1 step (CPU smoke test)")
    parser.add_argument("--profile", action="store_true",
                        help="one more step per variant, its generate under torch.profiler (tables in --out)")
    parser.add_argument(
        "--work", type=Path, default=None, help="scratch dir for weights (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    # Offline by design: without this, peft's save_pretrained asks the hub about the base model
    # id and waits ~20 s for a network that is not there.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import peft
    import torch
    import transformers
    import trl

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not args.tiny and device != "cuda":
        sys.exit("bench_grpo: the 1.5B/7B figures need a CUDA GPU; use --tiny for the CPU smoke test")
    sizes = ["tiny"] if args.tiny else args.sizes
    steps = 1 if args.tiny else args.steps
    completion = min(args.completion_tokens, 16) if args.tiny else args.completion_tokens
    print(f"bench_grpo: {NOTE}", flush=True)
    work_root = Path(tempfile.mkdtemp(prefix="bench-grpo-", dir=args.work))
    report = {
        "note": NOTE,
        "device": torch.cuda.get_device_name(0)
        if device == "cuda"
        else f"cpu ({platform.processor() or 'cpu'})",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "peft": peft.__version__,
        "results": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        variants = [(g, p, lean == "on") for p in args.prompts for g in args.generators for lean in args.lean]
        for size in sizes:
            profile = args.out if args.profile else None
            for result in bench_size(size, device, steps, completion, work_root / size, variants, profile):
                report["results"].append(result)
                r = result
                print(f"bench_grpo: {size} {label(r)} x{r['prompts']}: " + (
                    r["error"] if "error" in r else
                    f"step {r['step_mean_s']:.2f} s, generate {r['gen_tokens_per_s'] or 0:.0f} tok/s, "
                    f"last step {r['last_gen_tokens_per_s'] or 0:.0f} tok/s, "
                    f"first generate {r['first_generate_s'] or 0:.1f} s, peak {r['peak_gpu_mem_gib']} GiB"
                ), flush=True)
                (args.out / "bench_grpo.json").write_text(json.dumps(report, indent=2) + "\n")
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    (args.out / "bench_grpo.md").write_text(markdown(report))
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
