"""The static frontier (warpk.runtime.arms.frontier): which settings make it, and how a policy is read
against it, on constructed points where the answer is known."""

from warpk.runtime.arms.frontier import StaticPoint, frontier_figure, pareto, standing

GRID = [
    StaticPoint("700W", 0.99, 160.0),
    StaticPoint("600W", 0.98, 140.0),
    StaticPoint("500W", 0.95, 120.0),
    StaticPoint("500W/c64", 0.94, 130.0),  # beaten by 500W on both axes
    StaticPoint("400W", 0.80, 100.0),
    StaticPoint("300W", 0.80, 110.0),  # as attaining as 400W, dearer
]


def test_the_frontier_is_the_settings_nothing_beats_on_both_axes():
    assert [p.label for p in pareto(GRID)] == ["400W", "500W", "600W", "700W"]


def test_a_policy_cheaper_than_every_static_at_its_attainment():
    s = standing("PPO", 0.97, 105.0, pareto(GRID))
    assert s.static.label == "600W"  # the cheapest static reaching 0.97
    assert s.energy_share == 105.0 / 140.0 and s.dominated_by is None


def test_a_policy_a_static_setting_beats():
    s = standing("zeus", 0.94, 150.0, pareto(GRID))
    assert s.static.label == "500W" and s.energy_share == 150.0 / 120.0
    assert s.dominated_by.label == "600W"  # the most attaining of the cheaper ones


def test_a_policy_above_every_static_attainment_has_no_share():
    s = standing("oracle+", 0.995, 200.0, pareto(GRID))
    assert s.static is None and s.energy_share is None and s.dominated_by is None


def test_the_figure_is_written(tmp_path):
    path = frontier_figure(GRID, [standing("PPO", 0.97, 105.0, pareto(GRID))], "t", tmp_path / "f.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ties_duplicates_and_a_policy_on_the_frontier():
    tied = [StaticPoint("a", 0.9, 100.0), StaticPoint("b", 0.95, 100.0), StaticPoint("c", 0.95, 100.0),
            StaticPoint("d", 0.95, 120.0)]  # fmt: skip
    front = pareto(tied)
    assert [p.label for p in front] == ["b"]  # equal energy: the more attaining; equal both: one
    on = standing("static b", 0.95, 100.0, front)
    assert on.energy_share == 1.0 and on.dominated_by is None
    assert pareto([]) == [] and standing("x", 0.5, 1.0, []).static is None
