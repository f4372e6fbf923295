"""The serving cost model: measured prefill/decode costs, plus modelled power-cap and clock effects.

Measured part (fitted to the calibration file, taken at the card's own power limit and clocks):
  - prefill time and energy of one iteration: c0 + c1 * sum(prompt tokens) + c2 * sum(prompt^2)
    (a linear term for the weight GEMMs, a quadratic one for attention);
  - decode step time and energy: c0 + c1 * batch + c2 * sum(context tokens) (weights read once per
    step, per-sequence work, KV-cache reads).
  Coefficients are non-negative least squares on relative error. `heldout_error` refits on a subset
  and reports the error on the points left out.

Modelled part (MODELLED, not measured: notes/energy_anchors.md section 4.4, from Splitwise, Ma et al.
2026 "The Illusion of Power Capping in LLM Decode", VoltanaLLM, POLCA):
  - time at SM clock f: t(f) = t(f_max) * (rho * f_max / f + 1 - rho), rho = 0.95 for prefill and
    0.05 + 0.25 * min(1, batch / 256) for decode (memory-bound);
  - power at clock f: P(f) = P_idle + D * (s + (1 - s) * (f / f_max) ** 2.5), D = P_measured -
    P_idle, s = `runtime.fixed_power_share` (0 by default, as in the anchors' model; > 0 keeps a
    share of D, e.g. HBM power, independent of the SM clock: a sensitivity knob);
  - a power cap C lowers the effective clock to where P(f) = C; it never binds when the measured
    power is below C (decode at 137-300 W on a 700 W H200: "no cap ever triggers").

Non-goals: no I/O beyond reading the calibration file; no simulation (see env.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Modelled constants (energy_anchors.md 4.4, tag [D]): see the module docstring.
POWER_EXPONENT = 2.5
RHO_PREFILL = 0.95


def rho_decode(batch: int) -> float:
    """Share of decode step time that scales with 1/f (MODELLED, energy_anchors.md 4.4)."""
    return 0.05 + 0.25 * min(1.0, batch / 256.0)


class CalibrationError(ValueError):
    """The calibration file is missing, malformed, or a fixture where a measurement is required."""


@dataclass(frozen=True)
class PrefillPoint:
    batch: int
    prompt_tokens: int
    time_s: float
    energy_j: float
    power_w: float


@dataclass(frozen=True)
class DecodePoint:
    batch: int
    context_tokens: int
    step_time_s: float
    energy_j_per_step: float
    power_w: float


@dataclass(frozen=True)
class Calibration:
    """One calibration file as measured (or a test fixture, then `fixture` says so)."""

    path: str
    gpu: str
    model: str
    dtype: str
    date: str
    command: str
    idle_power_w: float
    prefill: tuple[PrefillPoint, ...]
    decode: tuple[DecodePoint, ...]
    fixture: str | None = None


def load_calibration(path: str | Path, allow_fixture: bool = False) -> Calibration:
    """Read a calibration file; refuses a file marked "fixture" unless `allow_fixture` (tests)."""
    path = Path(path)
    if not path.is_file():
        raise CalibrationError(
            f"runtime.calibration={path}: no such file (measure it on the GPU, see docs/runtime.md)"
        )
    try:
        doc = json.loads(path.read_text())
    except ValueError as err:
        raise CalibrationError(f"runtime.calibration={path} is malformed: {err!r}") from err
    if isinstance(doc, dict) and "fixture" in doc and not allow_fixture:
        raise CalibrationError(
            f"runtime.calibration={path} is a test fixture ({doc['fixture']}), not a measurement; "
            "only tests may use it (runtime.allow_fixture_calibration=true)"
        )
    try:
        prefill = tuple(
            PrefillPoint(
                int(p["batch"]),
                int(p["prompt_tokens"]),
                float(p["time_s"]),
                float(p["energy_j"]),
                float(p["power_w"]),
            )
            for p in doc["prefill"]
        )
        decode = tuple(
            DecodePoint(
                int(p["batch"]),
                int(p["context_tokens"]),
                float(p["step_time_s"]),
                float(p["energy_j_per_step"]),
                float(p["power_w"]),
            )
            for p in doc["decode"]
        )
        cal = Calibration(
            str(path),
            str(doc["gpu"]),
            str(doc["model"]),
            str(doc["dtype"]),
            str(doc["date"]),
            str(doc["command"]),
            float(doc["idle_power_w"]),
            prefill,
            decode,
            doc.get("fixture"),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise CalibrationError(f"runtime.calibration={path} is malformed: {err!r}") from err
    if len(prefill) < 3 or len(decode) < 3:
        raise CalibrationError(f"runtime.calibration={path} needs >= 3 prefill and >= 3 decode points")
    return cal


def prefill_features(batch: int, prompt_tokens: int) -> list[float]:
    return [1.0, float(batch * prompt_tokens), float(batch * prompt_tokens**2)]


def decode_features(batch: int, context_tokens: int) -> list[float]:
    return [1.0, float(batch), float(batch * context_tokens)]


def _fit(rows: list[list[float]], target: list[float]) -> tuple[float, ...]:
    """Non-negative least squares on relative error (each row divided by its target)."""
    from scipy.optimize import nnls  # here: the front door imports this module for its error (0.5 s)

    a = np.asarray(rows, dtype=float)
    y = np.asarray(target, dtype=float)
    coef, _ = nnls(a / y[:, None], np.ones_like(y))
    return tuple(float(c) for c in coef)


@dataclass(frozen=True)
class CostFit:
    """Fitted coefficients of the measured part (at the card's own settings)."""

    prefill_time: tuple[float, ...]
    prefill_energy: tuple[float, ...]
    decode_time: tuple[float, ...]
    decode_energy: tuple[float, ...]
    idle_power_w: float


def fit_costs(
    prefill: tuple[PrefillPoint, ...], decode: tuple[DecodePoint, ...], idle_power_w: float
) -> CostFit:
    pf = [prefill_features(p.batch, p.prompt_tokens) for p in prefill]
    df = [decode_features(p.batch, p.context_tokens) for p in decode]
    return CostFit(
        _fit(pf, [p.time_s for p in prefill]),
        _fit(pf, [p.energy_j for p in prefill]),
        _fit(df, [p.step_time_s for p in decode]),
        _fit(df, [p.energy_j_per_step for p in decode]),
        idle_power_w,
    )


def _dot(coef: tuple[float, ...], x: list[float]) -> float:
    return sum(c * v for c, v in zip(coef, x, strict=True))


@dataclass(frozen=True)
class HeldoutError:
    """Relative error (|pred - measured| / measured) of a fit on points it did not see."""

    prefill_time_mape: float
    prefill_energy_mape: float
    decode_time_mape: float
    decode_energy_mape: float
    prefill_time_max: float
    decode_time_max: float
    n_prefill_heldout: int
    n_decode_heldout: int
    rows: tuple[dict, ...]  # one per held-out point: phase, batch, tokens, measured, predicted


def _held_out_values(values: list[int]) -> set[int]:
    """Every other distinct value, never the smallest or the largest (no extrapolation)."""
    distinct = sorted(set(values))
    return set(distinct[1:-1:2])


def heldout_error(cal: Calibration) -> HeldoutError:
    """Fit on a subset and measure the error on the rest.

    Prefill: every other prompt length held out; decode: every other batch size held out (for
    batch 1..128 that is 2, 8, 24, 48, 96), at every context length measured.
    """
    out_p = _held_out_values([p.prompt_tokens for p in cal.prefill])
    out_d = _held_out_values([p.batch for p in cal.decode])
    fit_p = tuple(p for p in cal.prefill if p.prompt_tokens not in out_p)
    test_p = [p for p in cal.prefill if p.prompt_tokens in out_p]
    fit_d = tuple(p for p in cal.decode if p.batch not in out_d)
    test_d = [p for p in cal.decode if p.batch in out_d]
    if not test_p or not test_d:
        raise CalibrationError(f"{cal.path}: too few distinct prompt lengths or batch sizes to hold any out")
    fit = fit_costs(fit_p, fit_d, cal.idle_power_w)
    rows, errs = [], {"pt": [], "pe": [], "dt": [], "de": []}
    for p in test_p:
        x = prefill_features(p.batch, p.prompt_tokens)
        t, e = _dot(fit.prefill_time, x), _dot(fit.prefill_energy, x)
        errs["pt"].append(abs(t - p.time_s) / p.time_s)
        errs["pe"].append(abs(e - p.energy_j) / p.energy_j)
        rows.append(
            {
                "phase": "prefill",
                "batch": p.batch,
                "tokens": p.prompt_tokens,
                "time_s": p.time_s,
                "pred_time_s": t,
                "energy_j": p.energy_j,
                "pred_energy_j": e,
            }
        )
    for p in test_d:
        x = decode_features(p.batch, p.context_tokens)
        t, e = _dot(fit.decode_time, x), _dot(fit.decode_energy, x)
        errs["dt"].append(abs(t - p.step_time_s) / p.step_time_s)
        errs["de"].append(abs(e - p.energy_j_per_step) / p.energy_j_per_step)
        rows.append(
            {
                "phase": "decode",
                "batch": p.batch,
                "tokens": p.context_tokens,
                "time_s": p.step_time_s,
                "pred_time_s": t,
                "energy_j": p.energy_j_per_step,
                "pred_energy_j": e,
            }
        )
    return HeldoutError(
        float(np.mean(errs["pt"])),
        float(np.mean(errs["pe"])),
        float(np.mean(errs["dt"])),
        float(np.mean(errs["de"])),
        float(np.max(errs["pt"])),
        float(np.max(errs["dt"])),
        len(test_p),
        len(test_d),
        tuple(rows),
    )


@dataclass(frozen=True)
class PhaseScale:
    """Multipliers on the measured time and energy of each phase at the card's own settings.

    M5 (warpk/runtime/arms/hrl.py) sets them from deployed kernels (Amdahl over MODELLED op-class
    shares); 1.0 everywhere = the calibrated model unchanged.
    """

    prefill_time: float = 1.0
    prefill_energy: float = 1.0
    decode_time: float = 1.0
    decode_energy: float = 1.0


class CostModel:
    """Time and energy of one serving iteration at a power cap and SM clock.

    The setting-independent part is the fit to measurements (`CostFit`), times `scale` (M5's
    kernel multipliers, identity by default); the effect of the cap and the clock is MODELLED
    (module docstring). The arithmetic is `SettingCost`'s, one per setting asked for.
    """

    def __init__(
        self,
        fit: CostFit,
        sm_clock_max_mhz: float,
        fixed_power_share: float = 0.0,
        scale: PhaseScale | None = None,
    ) -> None:
        self.fit = fit
        self.f_max = sm_clock_max_mhz
        self.fixed_share = fixed_power_share  # of the dynamic power, not scaling with the SM clock
        self.scale = scale or PhaseScale()
        self._settings: dict[tuple[float, float | None], SettingCost] = {}

    def at(self, cap_w: float, clock_mhz: float | None) -> SettingCost:
        """The model at one setting, kept: the server asks for the same one all period long."""
        cost = self._settings.get((cap_w, clock_mhz))
        if cost is None:
            cost = self._settings[(cap_w, clock_mhz)] = SettingCost(self, cap_w, clock_mhz)
        return cost

    def prefill(
        self, sum_tokens: float, sum_sq_tokens: float, cap_w: float, clock_mhz: float | None
    ) -> tuple[float, float]:
        """(time_s, energy_j) of one prefill iteration over prompts with these token sums."""
        return self.at(cap_w, clock_mhz).prefill(sum_tokens, sum_sq_tokens)

    def decode_step(
        self, batch: int, sum_context: float, cap_w: float, clock_mhz: float | None
    ) -> tuple[float, float]:
        """(time_s, energy_j) of one decode step of `batch` sequences holding `sum_context` tokens."""
        return self.at(cap_w, clock_mhz).decode_step(batch, sum_context)


class SettingCost:
    """`CostModel` at one power cap and SM clock. What does not depend on the iteration (the clock
    ratio, its power factor, each batch's time factor) is worked out once, because the serving loop
    asks ~60 times per control period; every figure is computed with the same operations in the
    same order as the model's formulas (module docstring), so it is the same to the last bit."""

    def __init__(self, model: CostModel, cap_w: float, clock_mhz: float | None) -> None:
        fit, scale = model.fit, model.scale
        self.cap_w, self.f_max, self.idle_power_w = cap_w, model.f_max, fit.idle_power_w
        self.fixed_share, self.scaled_share = model.fixed_share, 1.0 - model.fixed_share
        self.clock_mhz = model.f_max if clock_mhz is None else min(clock_mhz, model.f_max)
        self.ratio = max(self.clock_mhz / model.f_max, 0.05)  # below 5% of f_max the model means nothing
        self.power_factor = self.ratio**POWER_EXPONENT
        self.prefill_time, self.prefill_energy = fit.prefill_time, fit.prefill_energy
        self.decode_time, self.decode_energy = fit.decode_time, fit.decode_energy
        self.scale = scale
        self.prefill_rho = (RHO_PREFILL, self._time_factor(RHO_PREFILL))
        self.decode_rho: dict[int, tuple[float, float]] = {}  # batch -> (rho, time factor)

    def _time_factor(self, rho: float) -> float:
        """t(f) / t(f_max) when the cap does not bind."""
        return rho / self.ratio + 1.0 - rho

    def _at_setting(
        self, time_s: float, energy_j: float, rho_factor: tuple[float, float]
    ) -> tuple[float, float]:
        p_idle = self.idle_power_w
        power_w = energy_j / time_s
        dyn_w = max(power_w - p_idle, 1e-9)
        fixed_w, scaled_w = self.fixed_share * dyn_w, self.scaled_share * dyn_w
        if power_w > self.cap_w:  # the cap lowers the clock to where P(f) = cap
            rho = rho_factor[0]
            room_w = max(self.cap_w - p_idle - fixed_w, 1e-9)
            f = min(self.clock_mhz, self.f_max * (room_w / max(scaled_w, 1e-9)) ** (1.0 / POWER_EXPONENT))
            ratio = max(f / self.f_max, 0.05)
            t = time_s * (rho / ratio + 1.0 - rho)
            p = p_idle + fixed_w + scaled_w * ratio**POWER_EXPONENT
        else:
            t = time_s * rho_factor[1]
            p = p_idle + fixed_w + scaled_w * self.power_factor
        return t, p * t

    def prefill(self, sum_tokens: float, sum_sq_tokens: float) -> tuple[float, float]:
        """(time_s, energy_j) of one prefill iteration over prompts with these token sums."""
        c, e = self.prefill_time, self.prefill_energy
        t = c[0] + c[1] * sum_tokens + c[2] * sum_sq_tokens
        en = e[0] + e[1] * sum_tokens + e[2] * sum_sq_tokens
        t, en = t * self.scale.prefill_time, en * self.scale.prefill_energy
        return self._at_setting(t, en, self.prefill_rho)

    def decode_step(self, batch: int, sum_context: float) -> tuple[float, float]:
        """(time_s, energy_j) of one decode step of `batch` sequences holding `sum_context` tokens."""
        c, e = self.decode_time, self.decode_energy
        t = c[0] + c[1] * batch + c[2] * sum_context
        en = e[0] + e[1] * batch + e[2] * sum_context
        t, en = t * self.scale.decode_time, en * self.scale.decode_energy
        rho_factor = self.decode_rho.get(batch)
        if rho_factor is None:
            rho = rho_decode(batch)
            rho_factor = self.decode_rho[batch] = (rho, self._time_factor(rho))
        return self._at_setting(t, en, rho_factor)
