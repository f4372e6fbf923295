"""Error of the serving simulator's cost fit on measured points it was not fitted on.

    python benchmarks/serving_fit_error.py                                   # the default H200 file
    python benchmarks/serving_fit_error.py PATH.json [--allow-fixture]

Fits prefill (every other prompt length held out) and decode (every other batch size held out,
never the smallest or largest) on the rest of the calibration file, then prints a markdown table of
each held-out point (measured, predicted, relative error) and the mean absolute percentage errors.
These are the numbers docs/runtime.md reports.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from warpk.runtime.serving.calibration import CalibrationError, heldout_error, load_calibration  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = ROOT / "warpk/runtime/serving/data/h200_qwen2.5-7b.json"
    parser.add_argument("path", nargs="?", default=str(default))
    parser.add_argument("--allow-fixture", action="store_true", help="accept a test fixture (tests only)")
    args = parser.parse_args()
    try:
        cal = load_calibration(args.path, allow_fixture=args.allow_fixture)
    except CalibrationError as err:
        sys.exit(str(err))
    err = heldout_error(cal)
    print(f"Calibration: {cal.path} ({cal.gpu}, {cal.model}, {cal.dtype}, {cal.date})\n")
    print("| phase | batch | tokens | time (s) | fit (s) | error | energy (J) | fit (J) | error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in err.rows:
        t_err = (r["pred_time_s"] - r["time_s"]) / r["time_s"]
        e_err = (r["pred_energy_j"] - r["energy_j"]) / r["energy_j"]
        print(
            f"| {r['phase']} | {r['batch']} | {r['tokens']} | {r['time_s']:.4f} | {r['pred_time_s']:.4f} | "
            f"{t_err:+.1%} | {r['energy_j']:.2f} | {r['pred_energy_j']:.2f} | {e_err:+.1%} |"
        )
    print(
        f"\nMean absolute error on held-out points: prefill time {err.prefill_time_mape:.1%}, "
        f"prefill energy {err.prefill_energy_mape:.1%} ({err.n_prefill_heldout} points); decode step time "
        f"{err.decode_time_mape:.1%}, decode energy {err.decode_energy_mape:.1%} "
        f"({err.n_decode_heldout} points). "
        f"Worst: prefill time {err.prefill_time_max:.1%}, decode time {err.decode_time_max:.1%}."
    )


if __name__ == "__main__":
    main()
