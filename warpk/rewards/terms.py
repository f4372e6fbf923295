"""Reward terms: pure functions of one EvalRecord (DESIGN.md 4.4, docs/rewards.md).

Every term is dimensionless and returns `float | None`; None means "not measured" (never a
stand-in number). Terms of a failed record are None except `correctness`, which carries the
failure tier. `total_reward` combines them with the weights of a RewardConfig.

Non-goals: no evaluation, no I/O, no trl/hydra/wandb imports (see warpk.rewards.adapters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from warpk.config import RewardConfig, SlaConfig
from warpk.records import EvalRecord

# Sources of energy that were measured on the device. "model" is excluded on purpose: modelled
# energy = modelled power x measured runtime, so ln(ref_energy / energy) would be exactly
# ln(speedup) again (warpk/telemetry/model.py) and the energy term would double-count speed.
MEASURED_SOURCES = ("nvml", "sampler")

# Status -> the RewardConfig field that holds its tier. Decisions (docs/rewards.md):
#   timeout, crashed: the compile-error tier. Neither proves the candidate loaded (records.COMPILED)
#     and both cost a worker; they must not score like an honest wrong answer.
#   implausible: the no-code tier, the worst. Faster than the roofline floor means the timing was
#     gamed or broken; it must never be rewarded and must never beat an honest failure.
TIER_FIELD = {
    "static_reject": "reward_no_code",
    "implausible": "reward_no_code",
    "compile_error": "reward_compile_error",
    "timeout": "reward_compile_error",
    "crashed": "reward_compile_error",
    "runtime_error": "reward_incorrect",
    "incorrect": "reward_incorrect",
    "too_big": "reward_incorrect",  # the task, before the candidate ran: its candidates score alike
}


def correctness(record: EvalRecord | None, cfg: RewardConfig) -> float:
    """The failure tier of a failed record, 0.0 for an ok one; None (no code at all) -> no-code tier."""
    if record is None:
        return cfg.reward_no_code
    if record.status == "ok":
        return 0.0
    return float(getattr(cfg, TIER_FIELD[record.status]))


def _ratio_log(ref: float | None, value: float | None) -> float | None:
    if ref is None or value is None or ref <= 0 or value <= 0:
        return None
    return math.log(ref / value)


def _measured(record: EvalRecord, allow_modelled: bool) -> bool:
    return record.energy_source in MEASURED_SOURCES or (allow_modelled and record.energy_source == "model")


def speedup(record: EvalRecord | None) -> float | None:
    """ln(ref_runtime_ms / runtime_ms) for an ok record: 0 at parity, ln 2 at twice as fast."""
    if record is None or record.status != "ok":
        return None
    return _ratio_log(record.ref_runtime_ms, record.runtime_ms)


def reads_energy(cfg: RewardConfig) -> bool:
    """Whether this reward has a term that reads the record's energy or power (M2, M3, HRL)."""
    return any(w > 0 for w in (cfg.beta_energy, cfg.delta_power, cfg.ipw_blend))


def unmeasured_energy_note(cfg: RewardConfig, energy_mode: str) -> str | None:
    """One line when this reward reads energy but its records will carry none that counts
    (`energy_mode` is the evaluator's resolved evaluate.energy): the arm then trains like M1."""
    if not reads_energy(cfg) or energy_mode in MEASURED_SOURCES:
        return None
    return (f"reward={cfg.name} reads energy, but evaluate.energy is {energy_mode} here, which the reward "
            "does not count: its energy, power and IPW terms are None, so this arm trains exactly like "
            "M1 (ln speedup only). Measured energy needs a GPU (evaluate.energy=nvml).")


def energy(record: EvalRecord | None, allow_modelled: bool = False) -> float | None:
    """ln(ref_energy_j / energy_j) for an ok record with measured energy: ln 2 at half the energy.

    None when energy was not measured, including modelled energy unless `allow_modelled`.
    A measurement that was attempted and failed (`energy_error` set) is imputed pessimistically
    as min(0, speedup term), so failing to be measured never beats parity (docs/rewards.md).
    """
    if record is None or record.status != "ok":
        return None
    if _measured(record, allow_modelled):
        return _ratio_log(record.ref_energy_j, record.energy_j)
    if record.energy_error:
        s = speedup(record)
        return None if s is None else min(0.0, s)
    return None


def power(record: EvalRecord | None, allow_modelled: bool = False) -> float | None:
    """1 - avg_power_w / ref_avg_power_w for an ok record with measured power (0 at parity, <= 1)."""
    if record is None or record.status != "ok" or not _measured(record, allow_modelled):
        return None
    if record.avg_power_w is None or not record.ref_avg_power_w:
        return None
    return 1.0 - record.avg_power_w / record.ref_avg_power_w


def _ratio(value: float | None, ref: float | None) -> float | None:
    if ref is None or value is None or ref <= 0 or value <= 0:
        return None
    return value / ref


def ipw(
    record: EvalRecord | None, allow_modelled: bool = False, op_share: float = RewardConfig.ipw_op_share
) -> float | None:
    """ln(ipw / ref_ipw) of the served model: capability per watt of a serving step (docs/rewards.md).

    A served step (relative units, 1 at the reference) in which the kernel's op takes `op_share`
    s of the time and energy (MODELLED, RewardConfig.ipw_op_share) and the rest draws the
    reference op's power (MODELLED, as in warpk/runtime/arms/hrl.py) becomes, with the MEASURED
    r_t = runtime_ms / ref_runtime_ms and r_p = avg_power_w / ref_avg_power_w,

        step time T = 1 - s + s*r_t,  step energy W = 1 - s + s*r_t*r_p,  step power = W / T.

    An ok record passed the task's correctness check, so the served model's capability is taken
    as the reference's (not measured), and capability per watt gives ln(ref power / power) =
    ln(T / W) = -ln(1 - w*(1 - r_p)), w = s*r_t / T the op's share of the new step's time.
    0 at parity and for any kernel drawing the reference's power however fast it is (the energy
    term is ln 2 for one twice as fast), > 0 for lower power; not a function of the energy ratio.

    None where power was not measured (modelled counts only with `allow_modelled`). A measurement
    that was attempted and failed is imputed with the power the energy term's imputation implies
    (no lower than the reference's, and high enough to keep energy at parity): min(0, ln T).
    """
    if not 0.0 <= op_share <= 1.0:
        raise ValueError(f"op_share={op_share!r}; allowed: a number in [0, 1]")
    if record is None or record.status != "ok":
        return None
    r_t = _ratio(record.runtime_ms, record.ref_runtime_ms)
    if r_t is None:
        return None
    step_time = 1.0 - op_share + op_share * r_t
    if not _measured(record, allow_modelled):
        return min(0.0, math.log(step_time)) if record.energy_error else None
    r_p = _ratio(record.avg_power_w, record.ref_avg_power_w)
    if r_p is None:
        return None
    step_energy = 1.0 - op_share + op_share * r_t * r_p
    return math.log(step_time / step_energy)


def sla_violation(
    ttft_s: Sequence[float] | None, e2e_s: Sequence[float] | None, sla: SlaConfig
) -> float | None:
    """Fraction of requests with TTFT > sla.ttft_p95_s or end-to-end latency > sla.e2e_p95_s.

    Latencies come from the serving environment (runtime controller, DESIGN.md 4.6); kernel
    records carry none, so this is not a term of an EvalRecord. None for no requests.
    """
    ttft = list(ttft_s or [])
    e2e = list(e2e_s or [])
    n = max(len(ttft), len(e2e))
    if n == 0:
        return None
    if ttft and e2e and len(ttft) != len(e2e):
        raise ValueError(f"ttft_s has {len(ttft)} requests but e2e_s has {len(e2e)}")
    bad = 0
    for i in range(n):
        late_first = bool(ttft) and ttft[i] > sla.ttft_p95_s
        late_end = bool(e2e) and e2e[i] > sla.e2e_p95_s
        bad += late_first or late_end
    return bad / n


def ok_floor(cfg: RewardConfig) -> float:
    """The lowest total an ok record gets: halfway between reward_incorrect and 0.

    Without it a correct but much slower kernel (alpha x ln(0.1) = -2.3) would score below an
    incorrect one, and the tiers would teach the policy to stop being correct.
    """
    return cfg.reward_incorrect / 2.0


def total_reward(
    record: EvalRecord | None,
    cfg: RewardConfig,
    sla: float | None = None,
    allow_modelled_energy: bool = False,
) -> float:
    """The scalar reward of one record.

    Failed (or None = no code): its tier. Ok: max(ok_floor, alpha*speedup + beta*energy +
    delta*power - gamma*sla + ipw_blend*ipw), a None term contributing 0 (as trl does); ipw is
    the served model's, with the op share cfg.ipw_op_share.
    `sla` is a violation fraction from `sla_violation` (runtime controller); None -> 0.
    """
    if record is None or record.status != "ok":
        return correctness(record, cfg)
    weighted = (
        (cfg.alpha_speedup, speedup(record)),
        (cfg.beta_energy, energy(record, allow_modelled_energy)),
        (cfg.delta_power, power(record, allow_modelled_energy)),
        (-cfg.gamma_sla, sla),
        (cfg.ipw_blend, ipw(record, allow_modelled_energy, cfg.ipw_op_share)),
    )
    value = sum(w * t for w, t in weighted if t is not None and w != 0.0)
    return max(ok_floor(cfg), float(value))


def all_terms(record: EvalRecord | None, cfg: RewardConfig, allow_modelled_energy: bool = False) -> dict:
    """Every term of one record by name (for logging and reports)."""
    return {
        "correctness": correctness(record, cfg),
        "speedup": speedup(record),
        "energy": energy(record, allow_modelled_energy),
        "power": power(record, allow_modelled_energy),
        "ipw": ipw(record, allow_modelled_energy, cfg.ipw_op_share),
        "total": total_reward(record, cfg, allow_modelled_energy=allow_modelled_energy),
    }
