"""docs/energy.md's meter figures recomputed from the data files they cite (docs/data/): a
statement that drifts from its data, or reads the data against its own threshold, fails here."""

import json

from tests.conftest import REPO

DATA = REPO / "docs" / "data"
ENERGY_DOC = (REPO / "docs" / "energy.md").read_text()


def test_the_square_wave_verdict_and_spreads_are_the_data_files():
    square = json.loads((DATA / "h200_bench_energy_square_trace.json").read_text())["sections"]["square"]
    counter = square["counter"]
    cycles = ("20 ms", "50 ms", "100 ms", "200 ms")
    spreads = " / ".join(f"{100 * counter['periods'][p]['std']:.1f} %" for p in cycles)
    assert f"counter {spreads} at 20" in ENERGY_DOC  # "counter 20.8 % / 3.8 % / 4.7 % / 1.2 % at 20 ..."

    above = [p for p, v in counter["periods"].items() if v["std"] > counter["spread_tol"]]
    assert not counter["continuous"] and counter["verdict"].startswith("samples only part of the time")
    assert above == ["20 ms", "50 ms", "100 ms"]
    assert "the counter samples only part of the time" in ENERGY_DOC
    assert "that reading ignored the threshold" in ENERGY_DOC


def test_the_stated_uncertainty_and_its_coverage_are_the_data_files():
    window = json.loads((DATA / "h200_bench_energy_meter.json").read_text())["sections"]["window"]
    aligned = {c["window_s"]: c for c in window["cases"] if c["aligned"]}
    assert f"**{100 * aligned[1.0]['mean_rel_uncertainty']:.2f} %** on average" in ENERGY_DOC
    covered = lambda w: round(aligned[w]["coverage"] * aligned[w]["repeats"])  # noqa: E731
    assert (covered(1.0), aligned[1.0]["repeats"], covered(5.0), aligned[5.0]["repeats"]) == (4, 5, 1, 2)
    assert "in 4 of 5 windows at 1 s and 1 of 2 at 5 s" in ENERGY_DOC
    assert [w for w, c in aligned.items() if c["coverage"] == 1.0] == [0.1, 0.2, 0.5, 2.0]
