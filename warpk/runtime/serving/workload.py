"""Request traces for the serving simulator: arrivals (Poisson or bursty) and token lengths.

Bursty arrivals are a two-state Markov-modulated Poisson process: bursts at `burst_factor` times
the mean rate for exponentially distributed periods (mean `burst_mean_s`) covering
`burst_fraction` of the time, and a lower rate in between, so the long-run mean is
`arrival_rate_rps`. Prompt and output lengths are lognormal with the configured means, clipped.

Non-goals: no replay of production traces (yet); everything is drawn from the given generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warpk.config import WorkloadConfig


@dataclass(frozen=True)
class Trace:
    """Requests of one episode, sorted by arrival time."""

    arrival_s: np.ndarray  # float64
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64, >= 1


def _rate_segments(cfg: WorkloadConfig, rng: np.random.Generator, duration_s: float) -> list[tuple]:
    """(start_s, end_s, rate_rps) pieces covering [0, duration_s)."""
    if cfg.arrival_process == "poisson" or cfg.burst_fraction == 0.0:
        return [(0.0, duration_s, cfg.arrival_rate_rps)]
    burst_rate = cfg.arrival_rate_rps * cfg.burst_factor
    calm_rate = cfg.arrival_rate_rps * (1 - cfg.burst_fraction * cfg.burst_factor) / (1 - cfg.burst_fraction)
    calm_mean_s = cfg.burst_mean_s * (1 - cfg.burst_fraction) / cfg.burst_fraction
    in_burst = bool(rng.random() < cfg.burst_fraction)
    segments, t = [], 0.0
    while t < duration_s:
        length = rng.exponential(cfg.burst_mean_s if in_burst else calm_mean_s)
        end = min(t + length, duration_s)
        segments.append((t, end, burst_rate if in_burst else calm_rate))
        t, in_burst = end, not in_burst
    return segments


def _lognormal_tokens(rng: np.random.Generator, mean: float, sigma: float, n: int, hi: int) -> np.ndarray:
    mu = np.log(mean) - sigma**2 / 2  # so that the mean before clipping is `mean`
    return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, hi).astype(np.int64)


def make_trace(
    cfg: WorkloadConfig, rng: np.random.Generator, duration_s: float, max_prefill_tokens: int
) -> Trace:
    """Draw the requests arriving in [0, duration_s); a prompt is at most `max_prefill_tokens` (the
    server's prefill budget, runtime.max_prefill_tokens) as well as cfg.max_prompt_tokens."""
    times = []
    for start, end, rate in _rate_segments(cfg, rng, duration_s):
        count = rng.poisson(rate * (end - start))
        times.append(rng.uniform(start, end, count))
    arrival = np.sort(np.concatenate(times)) if times else np.zeros(0)
    n = len(arrival)
    max_prompt = min(cfg.max_prompt_tokens, max_prefill_tokens)
    prompt = _lognormal_tokens(rng, cfg.prompt_tokens_mean, cfg.prompt_tokens_sigma, n, max_prompt)
    output = _lognormal_tokens(rng, cfg.output_tokens_mean, cfg.output_tokens_sigma, n, cfg.max_output_tokens)
    return Trace(arrival, prompt, output)
