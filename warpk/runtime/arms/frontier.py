"""Where each policy stands against every static setting at once (issue #34 item 3).

The oracle static is one point of the static grid; a policy can beat it and still be beaten by a
static setting that trades a little attainment for much less energy. So every (cap, clock,
concurrency) setting of the grid is evaluated on the same held-out episodes, and its mean SLA
attainment and mean energy per request make a point. The **static frontier** is the settings no
other setting beats on both (at least the attainment at no more energy). A policy is read
against it at its own attainment: the cheapest static setting reaching that attainment, and the
policy's energy as a share of that setting's (below 1: cheaper than any static setting that
attains as much; None: no static setting attains as much).

Every figure is SIMULATED (warpk.runtime.serving.env). `frontier_table` is the table under the run's
main table, `frontier_figure` the figure (runtime_frontier.png in the run dir).

Non-goals: no policy is trained or chosen here; the verdict stays warpk.runtime.control.evaluation's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from warpk.runtime.serving.env import EpisodeResult
from warpk.tables import Cell, Table, num, text

Action = tuple[int, int, int]


@dataclass(frozen=True)
class StaticPoint:
    """One static setting on the evaluation episodes: means over the episodes."""

    label: str  # e.g. "500W/max/c128"
    sla_attainment: float
    energy_per_request_j: float


@dataclass(frozen=True)
class Standing:
    """A policy against the static frontier at its own attainment."""

    policy: str
    sla_attainment: float
    energy_per_request_j: float
    static: StaticPoint | None  # the cheapest static setting with attainment >= the policy's
    energy_share: float | None  # the policy's energy / that setting's; None without one
    dominated_by: StaticPoint | None  # a static setting with >= attainment and < energy, if any


def points(labels: dict[Action, str], results: dict[Action, list[EpisodeResult]]) -> list[StaticPoint]:
    """Every static setting's means over its episodes."""
    return [
        StaticPoint(labels[a], float(np.mean([r.sla_attainment for r in rs])),
                    float(np.mean([r.energy_per_request_j for r in rs])))
        for a, rs in results.items()
    ]  # fmt: skip


def pareto(statics: list[StaticPoint]) -> list[StaticPoint]:
    """The settings no other setting beats on both axes, by rising energy (and attainment)."""
    front: list[StaticPoint] = []
    for p in sorted(statics, key=lambda p: (p.energy_per_request_j, -p.sla_attainment)):
        if not front or p.sla_attainment > front[-1].sla_attainment:
            front.append(p)
    return front


def standing(policy: str, sla_attainment: float, energy_j: float, front: list[StaticPoint]) -> Standing:
    """`policy` (its mean attainment and energy per request) against the frontier `front`."""
    reaching = [p for p in front if p.sla_attainment >= sla_attainment]
    static = min(reaching, key=lambda p: p.energy_per_request_j) if reaching else None
    cheaper = [p for p in reaching if p.energy_per_request_j < energy_j]
    dominated = max(cheaper, key=lambda p: p.sla_attainment) if cheaper else None
    share = energy_j / static.energy_per_request_j if static is not None else None
    return Standing(policy, sla_attainment, energy_j, static, share, dominated)


def frontier_table(standings: list[Standing], front: list[StaticPoint], title: str) -> Table:
    """One row per policy: its means, the cheapest static setting attaining as much, the share."""
    table = Table("runtime_frontier", title, [
        "policy", "SLA attainment", "J/request", "cheapest static at >= its attainment",
        "its J/request", "energy / that static's", "beaten by a static"])  # fmt: skip
    for s in standings:
        table.add(
            text(s.policy),
            num(s.sla_attainment, (), ".4f"),
            num(s.energy_per_request_j, (), ".1f"),
            text(f"{s.static.label} ({s.static.sla_attainment:.4f})" if s.static else "none attains it"),
            num(s.static.energy_per_request_j if s.static else None, (), ".1f"),
            num(s.energy_share, (), ".3f"),
            text(f"yes: {s.dominated_by.label}" if s.dominated_by else "no"),
        )
    table.add(text(f"(frontier: {len(front)} static settings)"), *(Cell("") for _ in range(6)))
    return table


def frontier_figure(statics: list[StaticPoint], standings: list[Standing], title: str, path: Path) -> Path:
    """Every static setting (grey), the frontier (line) and each policy (labelled), attainment
    against energy per request."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not statics:
        raise ValueError("no static setting to draw a frontier of")
    front = pareto(statics)
    # the axis spans the frontier (where the choice is); what lies below is drawn on its edge
    low = max(0.0, min(p.sla_attainment for p in front) - 0.02)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    shown = [p for p in statics if p.sla_attainment >= low]
    below = len(statics) - len(shown)
    ax.scatter([p.energy_per_request_j for p in shown], [p.sla_attainment for p in shown], s=12,
               color="0.75", label=f"static settings ({below} below the axis)")  # fmt: skip
    ax.step([p.energy_per_request_j for p in front], [p.sla_attainment for p in front], where="post",
            color="0.3", label="static frontier")  # fmt: skip
    markers = "osD^PX*hp<>"
    for i, s in enumerate(standings):  # in the legend, not on the points: close points stay readable
        below_axis = s.sla_attainment < low
        label = f"{s.policy} ({s.sla_attainment:.3f}, below the axis)" if below_axis else s.policy
        ax.scatter([s.energy_per_request_j], [max(s.sla_attainment, low)], s=40, zorder=3,
                   marker="v" if below_axis else markers[i % len(markers)], label=label)  # fmt: skip
    ax.set_ylim(low, 1.0 + (1.0 - low) * 0.03)
    ax.set_xlabel("energy per request (J), SIMULATED")
    ax.set_ylabel("SLA attainment (mean over held-out episodes)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="lower right", fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
