"""Split the energy of one generation request into prefill and decode.

Boundary split (TokenPowerBench, Intelligence-per-Watt; notes/energy_anchors.md §6): prefill is
[request start, first token], decode is [first token, last token]; each phase's energy is the
difference of the trace's interpolated cumulative energy at its ends. Each value carries the
interpolation bound of warpk.telemetry.trace, so a prefill shorter than one counter update
(~100 ms) shows an uncertainty as large as the value: aggregate many requests, or pass
`min_phase_s` to get None for phases too short to resolve.

Non-goals: no attribution under continuous batching (phases of concurrent requests overlap:
use per-iteration regression instead); idle power is not subtracted (report it separately).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from warpk.telemetry.trace import EnergyTrace


@dataclass(frozen=True)
class PhaseEnergy:
    """Energy of the prefill and decode phases of one request. None = not resolved.

    Attributes:
        prefill_energy_j: energy from request start to the first token.
        decode_energy_j: energy from the first token to the last.
        prefill_uncertainty_j, decode_uncertainty_j: interpolation bounds.
        prefill_s, decode_s: phase lengths.
        prefill_avg_power_w, decode_avg_power_w: energy / length (None for a zero-length phase).
        output_tokens: number of token timestamps.
        decode_energy_per_token_j: decode energy / tokens after the first (None with one token).
    """

    prefill_energy_j: float | None
    decode_energy_j: float | None
    prefill_uncertainty_j: float | None
    decode_uncertainty_j: float | None
    prefill_s: float
    decode_s: float
    prefill_avg_power_w: float | None
    decode_avg_power_w: float | None
    output_tokens: int
    decode_energy_per_token_j: float | None


def attribute_prefill_decode(trace: EnergyTrace, token_timestamps: Sequence[float],
                             start_s: float | None = None, min_phase_s: float = 0.0) -> PhaseEnergy:
    """Prefill and decode energy of one request from its trace and token times.

    Args:
        trace: readings covering the request (same clock as the timestamps).
        token_timestamps: when each output token was produced, seconds, ascending.
        start_s: when the request was submitted; default: the trace's workload start
            (`trace.start_s`, else its first knot).
        min_phase_s: phases shorter than this get None energies (e.g. the counter period).

    Returns:
        The split; raises ValueError when a timestamp is outside the trace.
    """
    tokens = list(token_timestamps)
    if not tokens:
        raise ValueError("token_timestamps is empty: no first token, no split")
    if any(b < a for a, b in zip(tokens, tokens[1:], strict=False)):
        raise ValueError("token_timestamps must be ascending")
    start = trace.interval[0] if start_s is None else start_s
    first, last = tokens[0], tokens[-1]
    if first < start:
        raise ValueError(f"first token at {first} s precedes the request start {start} s")

    def phase(t0: float, t1: float) -> tuple[float | None, float | None, float | None]:
        if t1 - t0 < min_phase_s:
            return None, None, None
        energy_j, bound_j = trace.energy_between(t0, t1)
        return energy_j, bound_j, (energy_j / (t1 - t0) if t1 > t0 else None)

    pre_j, pre_bound, pre_w = phase(start, first)
    dec_j, dec_bound, dec_w = phase(first, last)
    per_token_j = dec_j / (len(tokens) - 1) if dec_j is not None and len(tokens) > 1 else None
    return PhaseEnergy(
        prefill_energy_j=pre_j,
        decode_energy_j=dec_j,
        prefill_uncertainty_j=pre_bound,
        decode_uncertainty_j=dec_bound,
        prefill_s=first - start,
        decode_s=last - first,
        prefill_avg_power_w=pre_w,
        decode_avg_power_w=dec_w,
        output_tokens=len(tokens),
        decode_energy_per_token_j=per_token_j,
    )
