"""Rewards (DESIGN.md 4.4; formulas, tiers, IPW and None handling in docs/rewards.md).

    terms.py     pure term functions of an EvalRecord, sla_violation, total_reward
    adapters.py  trl-facing TermReward (one per term), RecordSource seam, SharedBatch

Non-goals: no evaluation and no trl/hydra/wandb import (the trainer passes these objects to trl).
"""

from warpk.rewards.adapters import TERMS, RecordSource, SharedBatch, TermReward, reward_functions
from warpk.rewards.terms import (
    MEASURED_SOURCES,
    TIER_FIELD,
    all_terms,
    correctness,
    energy,
    ipw,
    ok_floor,
    power,
    sla_violation,
    speedup,
    total_reward,
)

__all__ = [
    "MEASURED_SOURCES",
    "TERMS",
    "TIER_FIELD",
    "RecordSource",
    "SharedBatch",
    "TermReward",
    "all_terms",
    "correctness",
    "energy",
    "ipw",
    "ok_floor",
    "power",
    "reward_functions",
    "sla_violation",
    "speedup",
    "total_reward",
]
