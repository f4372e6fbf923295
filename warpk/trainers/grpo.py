"""M1-M3: trl GRPOTrainer with LoRA, rewarded by the real evaluator (DESIGN.md 4.5).

`run_grpo` reads top to bottom: policy, evaluator, reward source, reward functions, dataset,
trainer, train (resuming from the run dir's latest checkpoint), save the adapter.

- Group size `train.num_generations` (default 8): the generation batch
  (per_device_batch_size x gradient_accumulation_steps) must be a multiple of it.
- Rewards: `warpk.rewards.reward_functions` gives one trl function per term (`total` weight 1,
  the others weight 0 so trl logs `rewards/<term>/mean` without counting them twice); all share
  one `SharedBatch`, so one `evaluate_many` call serves every term of a reward batch.
- On the CPU energy is modelled: the energy/power/ipw terms are None for every record, trl logs
  their mean as None (W&B keeps the key with a null value; docs/training.md).

Non-goals: no custom loss (`train.negative_advantage_weight` < 1 rescales trl's advantages,
`train.credit_cutoff` masks tokens out of trl's loss at the cost of one no-grad forward pass,
nothing more). `model.turns=k > 1` swaps `total` for the discounted return over refinement turns
(warpk.trainers.multiturn).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from warpk.config import RunConfig
from warpk.rewards import SharedBatch, reward_functions
from warpk.rewards.terms import reads_energy, unmeasured_energy_note
from warpk.trainers import common, distributed
from warpk.trainers.checkpoints import stamp_callback
from warpk.trainers.data import grpo_rows, to_dataset, train_tasks
from warpk.trainers.lean_sampling import half_precision, lean
from warpk.trainers.multiturn import DiscountedTotal, MultiTurnRollout, task_of_prompts
from warpk.trainers.source import EvaluatorSource

VLLM_GPU_MEMORY_SHARE = 0.3  # of the GPU's memory for vLLM's weights and KV cache
STATIC_PROMPT_BUCKET = 256  # hf-static: prompts padded to a multiple of this many tokens
PAGED_CACHE_PAGE_TOKENS = 256  # hf-paged on the CPU: transformers' page size
PAGED_CACHE_BATCH_TOKENS = 8192  # ... and at most its default tokens per forward


def grpo_args(config: RunConfig, run_dir: Path):
    from trl import GRPOConfig

    return GRPOConfig(
        **common.trainer_args(config, run_dir),
        num_generations=config.train.num_generations,
        max_completion_length=config.policy.max_new_tokens,
        temperature=config.policy.temperature,
        beta=config.train.beta,
        scale_rewards=config.train.scale_rewards,
        mask_truncated_completions=config.train.mask_truncated_completions,
        loss_type=config.train.loss_type,
        # no dropout (LoRA's included) while GRPO samples and scores: the completions then come
        # from the policy whose log-probabilities the loss uses, and a decode step runs no RNG
        disable_dropout=True,
        log_completions=False,
        **generator_args(config),
    )


def generator_args(config: RunConfig) -> dict:
    """trl's arguments for `policy.generator` (docs/training.md, "Generation"):
    - hf: transformers' generate with a dynamic KV cache, eager (trl's default);
    - hf-static: a static KV cache, prompts left-padded to a multiple of STATIC_PROMPT_BUCKET
      tokens so that the compiled decode step sees few shapes (compile is switched on by
      `enable_compiled_decode` once the trainer exists: trl builds its GenerationConfig with
      compile disabled);
    - hf-paged: transformers' continuous batching over a paged KV cache;
    - vllm: trl's colocated vLLM in each training process, leaving most of the GPU to the
      policy's training and the evaluator's measurements (preflight checked vllm exists)."""
    generator = config.policy.generator
    if generator == "hf-static":
        return {"cache_implementation": "static", "pad_to_multiple_of": STATIC_PROMPT_BUCKET}
    if generator == "hf-paged":
        args = {"use_transformers_continuous_batching": True}
        if config.hardware.device == "cpu":
            args["transformers_continuous_batching_config"] = paged_cache_for_batch(config)
        return args
    if generator == "vllm":
        return {
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": VLLM_GPU_MEMORY_SHARE,
            "vllm_max_model_length": config.train.max_prompt_length + config.policy.max_new_tokens,
        }
    return {}


def paged_cache_for_batch(config: RunConfig) -> dict:
    """hf-paged on the CPU: a paged cache sized for one generation batch. transformers sizes it
    from free memory otherwise (trl: half of it), and on the CPU that is half the host's RAM,
    zeroed page by page: 23 s before the first token of a tiny model on a 24 GiB machine."""
    t = config.train
    sequences = t.per_device_batch_size * t.gradient_accumulation_steps  # trl's generation batch
    tokens = t.max_prompt_length + config.policy.max_new_tokens
    pages = sequences * -(-tokens // PAGED_CACHE_PAGE_TOKENS)
    return {"page_size": PAGED_CACHE_PAGE_TOKENS, "num_blocks": pages,
            "max_batch_tokens": min(PAGED_CACHE_BATCH_TOKENS, sequences * tokens)}


def enable_compiled_decode(trainer) -> None:
    """hf-static: let transformers compile the decode step over the static cache (trl passes
    `disable_compile=True`; transformers compiles only on an accelerator)."""
    trainer.generation_config.disable_compile = False


def credit_mask(token_probs, mask, advantages, cutoff: float):
    """Which completion tokens get credit when credit stops at a completion's first slip, a token
    the policy sampled with probability below `cutoff` (under the sampling temperature).

    A completion worse than its group's mean (advantage < 0) is charged for its tokens up to and
    including its first slip, the likely cause of its failure; what follows the slip was written
    in contexts the policy never learned, and pushing all of it down spreads probability. A
    better one (advantage >= 0) is credited for its tokens before its first slip only: the slips
    of a correct completion are harmless, and reinforcing them is what made larger GRPO steps
    collapse the memorised policy (docs/training.md, "Does it learn?"). A completion without a
    slip keeps every token. Shapes: (B, T) probabilities and 0/1 mask, (B,) advantages."""
    import torch

    slips = (token_probs < cutoff) & mask.bool()
    before = slips.int().cumsum(dim=1) - slips.int()  # slips strictly before each position
    upto_first = before == 0  # positions up to and including the first slip
    keep = torch.where((advantages < 0).unsqueeze(1), upto_first, upto_first & ~slips)
    return keep.to(mask.dtype) * mask


def trainer_class(negative_advantage_weight: float, credit_cutoff: float | None = None,
                  lean_sampling: bool = False):
    """trl's GRPOTrainer, or one that samples leaner or changes what it computed before its loss:
    - lean_sampling: generation runs under `warpk.trainers.lean_sampling` (adapters in the base's
      dtype, no host sync per token), a no-op on an fp32 CPU policy;
    - negative_advantage_weight < 1: negative advantages (after trl's group centring and
      `scale_rewards`) are multiplied by it;
    - credit_cutoff: each completion's loss covers only the tokens `credit_mask` keeps, through
      trl's `tool_mask` (the loss mask it multiplies into `completion_mask`; so the entropy trl
      logs covers those tokens only, its length metrics all of them). The probabilities cost one
      more no-grad forward pass of the generation batch (trl's old log-probabilities where it
      has them). trl's dapo normaliser (`num_items_in_batch`) is computed before this and still
      counts the masked-out tokens, so the loss shrinks by the share of tokens kept; with AdamW
      that is close to a no-op, and it is what the 2026-12-04 runs in docs/training.md used.

    A subclass because trl 1.16 has no hook between its advantages and its loss; it overrides
    one private method whose output keeps its keys (pinned trl<1.17). trl's own logs (the
    completions table, `advantages` metrics) still show the unscaled advantages."""
    from trl import GRPOTrainer

    if negative_advantage_weight == 1.0 and credit_cutoff is None and not lean_sampling:
        return GRPOTrainer

    class WarpkGRPOTrainer(GRPOTrainer):
        def _generate_single_turn(self, *args, **kwargs):
            with lean(self):  # a no-op unless lean_sampling
                return super()._generate_single_turn(*args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            a = batch["advantages"]
            if credit_cutoff is not None:
                mask = batch["completion_mask"]  # the policy's own tokens: a rollout's env_mask is 0
                mask = mask if "tool_mask" not in batch else mask * batch["tool_mask"]  # on feedback
                batch["tool_mask"] = credit_mask(self._token_probs(batch), mask, a, credit_cutoff)
            batch["advantages"] = a.where(a >= 0, a * negative_advantage_weight)
            return batch

        def _token_probs(self, batch):
            """The sampling policy's probability of each completion token: trl's own old
            log-probabilities where it computed them, else one no-grad pass in its chunks."""
            import torch
            from trl.models.utils import disable_gradient_checkpointing

            if batch.get("old_per_token_logps") is not None:
                return batch["old_per_token_logps"].exp()
            ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
            attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
            kwargs = self.args.gradient_checkpointing_kwargs
            with torch.no_grad(), disable_gradient_checkpointing(self.model, kwargs):
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, batch["completion_ids"].size(1),
                    batch_size=self.args.per_device_train_batch_size,
                )
            return logps.exp()

    WarpkGRPOTrainer.lean_sampling = lean_sampling  # read by lean(), multi-turn rollouts included
    return WarpkGRPOTrainer


def build_trainer(config: RunConfig, run_dir: Path, source):
    """The GRPOTrainer for `config`, its rewards reading records from `source`."""
    train, policy = config.train, config.policy
    model, tokenizer, peft_config = common.load_train_policy(config)
    lean = policy.lean_sampling and policy.generator in ("hf", "hf-static") and half_precision(model)
    GRPOTrainer = trainer_class(train.negative_advantage_weight, train.credit_cutoff, lean)  # noqa: N806
    shared = SharedBatch(source)
    funcs, weights = reward_functions(shared, config.reward)
    args = grpo_args(config, run_dir)
    args.reward_weights = weights
    rows = grpo_rows(config, train_tasks(config), tokenizer)
    rollout = None
    if config.model.turns > 1:  # every turn trained; total = the discounted return over turns
        funcs[0] = DiscountedTotal()
        task_of = task_of_prompts(rows)
        turns, discount = config.model.turns, config.train.turn_discount
        rollout = MultiTurnRollout(shared, config.reward, turns, discount, task_of)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=to_dataset(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[stamp_callback(config.policy, config.model.name)],
        rollout_func=rollout,
    )
    if config.policy.generator == "hf-static":
        enable_compiled_decode(trainer)
    return trainer


def run_grpo(config: RunConfig, run_dir: Path, log: Callable[[dict], None]) -> tuple[object, dict]:
    """Train with GRPO; returns (trainer, summary). The adapter is saved to <run_dir>/adapter."""
    run_dir = Path(run_dir)
    evaluator = common.build_evaluator(config, for_reward=True)
    note = unmeasured_energy_note(config.reward, evaluator.energy)
    if note:
        print(note, flush=True)
    source = EvaluatorSource(evaluator, train_tasks(config))
    trainer = build_trainer(config, run_dir, source)
    try:
        summary = common.train_and_save(config, run_dir, trainer, log)
    finally:
        evaluator.close()  # its lanes, warm from step to step, are not needed for held-out sampling
    if reads_energy(config.reward):  # the report marks energy arms that trained without it
        summary["reward_energy_measured"] = note is None
    counts = distributed.summed(source.counts)  # every process's completions, not rank 0's
    total = sum(counts.values())
    for status, n in sorted(counts.items()):
        summary[f"train/completions_{status}"] = float(n)
    summary["train/completions"] = float(total)
    return trainer, summary
