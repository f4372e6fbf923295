"""trl-facing reward functions: one small picklable callable per term (STYLE.md rule 5).

trl calls each reward function with `prompts`, `completions`, every dataset column (here
`task_id`, repeated per generation) and extras; it logs `rewards/<__name__>/mean`. Each adapter
asks a shared `RecordSource` for the records of the batch, one per completion, each scored
against that completion's OWN task_id, and maps one term over them.

`RecordSource` is the seam to the evaluator: the GRPO trainer implements it with code extraction
+ `Evaluator.evaluate_many`; tests use a double. `SharedBatch` wraps a source so that all terms
of one batch share a single `records_for` call. The `correctness` adapter also logs, through
trl's `log_metric`, what the evaluator said of the batch (`evaluator/correct_rate`,
`evaluator/compile_rate`, `evaluator/ok_speedup_geomean`): trl averages them per step.

Non-goals: no trl, hydra or wandb import; no evaluation here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from warpk.config import RewardConfig
from warpk.records import COMPILED, EvalRecord
from warpk.rewards import terms

TERMS = ("total", "correctness", "speedup", "energy", "power", "ipw")


class RecordSource(Protocol):
    """Evaluates a batch: record i belongs to completions[i] on task_ids[i].

    A record may be None when the completion has no code at all (scored with the no-code tier).
    """

    def records_for(self, completions: Sequence[Any], task_ids: Sequence[str]) -> list[EvalRecord | None]: ...


def completion_text(completion: Any) -> str:
    """The text of a completion: a plain string, or the last message of a conversational one."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


class SharedBatch:
    """Memoises the last batch of a RecordSource so every term of a reward step shares one call."""

    def __init__(self, source: RecordSource) -> None:
        self.source = source
        self._key: tuple | None = None
        self._records: list[EvalRecord | None] = []

    def records_for(self, completions: Sequence[Any], task_ids: Sequence[str]) -> list[EvalRecord | None]:
        key = (tuple(completion_text(c) for c in completions), tuple(task_ids))
        if key != self._key:
            records = list(self.source.records_for(completions, task_ids))
            if len(records) != len(completions):
                raise ValueError(
                    f"record source returned {len(records)} records for {len(completions)} completions"
                )
            self._key, self._records = key, records
        return list(self._records)

    def prime(
        self, texts: Sequence[str], task_ids: Sequence[str], records: Sequence[EvalRecord | None]
    ) -> None:
        """Memoise records already measured for these completion texts (a multi-turn rollout's
        last turn), so the reward terms read them instead of evaluating the text again."""
        if len(records) != len(texts):
            raise ValueError(f"{len(records)} records for {len(texts)} completions")
        self._key, self._records = (tuple(texts), tuple(task_ids)), list(records)


LANE_MEANS = ("lane_power_mean_w", "lane_power_max_w", "lane_sm_clock_mean_mhz", "lane_temperature_max_c")


def batch_rates(records: Sequence[EvalRecord | None]) -> dict[str, float]:
    """What the evaluator said of one reward batch: correct and compile rates (None = no code
    counts as neither) and the geometric-mean speedup of its ok records when there are any."""
    n = max(len(records), 1)
    ok = [r for r in records if r is not None and r.status == "ok"]
    rates = {
        "correct_rate": len(ok) / n,
        "compile_rate": sum(r is not None and r.status in COMPILED for r in records) / n,
    }
    speedups = [r.speedup for r in ok if r.speedup and r.speedup > 0]
    if speedups:
        rates["ok_speedup_geomean"] = math.exp(sum(map(math.log, speedups)) / len(speedups))
    for field in LANE_MEANS:  # evaluate.energy=sampler: the lanes while the batch was measured
        values = [getattr(r, field) for r in ok if getattr(r, field) is not None]
        if values:
            rates[field] = sum(values) / len(values)
    return rates


class TermReward:
    """One reward term as a trl reward function; `__name__` is the term, so trl logs rewards/<term>/mean."""

    def __init__(
        self, term: str, source: RecordSource, cfg: RewardConfig, allow_modelled_energy: bool = False
    ) -> None:
        if term not in TERMS:
            raise ValueError(f"term={term!r}; allowed: {', '.join(TERMS)}")
        self.__name__ = term
        self.term = term
        self.source = source
        self.cfg = cfg
        self.allow_modelled_energy = allow_modelled_energy

    def score(self, record: EvalRecord | None) -> float | None:
        m = self.allow_modelled_energy
        if self.term == "total":
            return terms.total_reward(record, self.cfg, allow_modelled_energy=m)
        if self.term == "correctness":
            return terms.correctness(record, self.cfg)
        if self.term == "speedup":
            return terms.speedup(record)
        if self.term == "energy":
            return terms.energy(record, m)
        if self.term == "power":
            return terms.power(record, m)
        return terms.ipw(record, m, self.cfg.ipw_op_share)

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str], **kwargs: Any
    ) -> list[float | None]:
        if len(task_id) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(task_id)} task ids")
        records = self.source.records_for(completions, list(task_id))
        log_metric = kwargs.get("log_metric")  # trl's: a per-step mean in its logs and W&B
        if log_metric is not None and self.term == "correctness":
            for name, value in batch_rates(records).items():
                log_metric(f"evaluator/{name}", value)
        return [self.score(r) for r in records]

    def __repr__(self) -> str:
        return f"TermReward({self.term!r})"


def reward_functions(
    source: RecordSource, cfg: RewardConfig, allow_modelled_energy: bool = False
) -> tuple[list[TermReward], list[float]]:
    """The reward functions and GRPOConfig.reward_weights for a RewardConfig.

    `total` (weight 1) carries the whole reward, tiers and ok floor included; every term whose
    config weight is non-zero (correctness always) is added with weight 0, so trl logs it as
    rewards/<term>/mean without counting it twice. All share one `SharedBatch`.
    """
    shared = source if isinstance(source, SharedBatch) else SharedBatch(source)
    names = ["total", "correctness"]
    for name, weight in (
        ("speedup", cfg.alpha_speedup),
        ("energy", cfg.beta_energy),
        ("power", cfg.delta_power),
        ("ipw", cfg.ipw_blend),
    ):
        if weight != 0.0:
            names.append(name)
    funcs = [TermReward(n, shared, cfg, allow_modelled_energy) for n in names]
    return funcs, [1.0] + [0.0] * (len(funcs) - 1)
