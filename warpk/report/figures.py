"""Figures of a report (matplotlib, Agg backend), each drawn only when its data is in the runs.

    pareto_runtime_energy    every ok candidate's runtime and energy relative to its task's
                             reference (log-log), each run's geometric mean, and the Pareto front
                             of those run means; axis labels say "modelled" when it is
    pass_at_k_vs_turns       mean pass@k over tasks against model.turns, per arm
    reward_decomposition     mean weighted reward terms per arm (warpk.rewards.all_terms with
                             each run's own reward weights)
    runtime_regimes          energy per request and SLA attainment of every runtime policy per SLA
                             regime (runtime_results.jsonl of stage=runtime), labelled SIMULATED
    seed_robustness          each seed's correct rate and speedup per arm, with the t-interval
    correct_rate_by_level    correct rate per task suite (KernelBench level) and arm
    measured_vs_modelled     measured against modelled energy of the same candidates (log-log)
    matched_runtime_energy   energy difference of each matched-runtime pair, per arm

`draw_all` returns name -> PNG path, or name -> the one-line reason the figure is absent.

Non-goals: no statistics (analysis.py); no styling beyond legible labels, units and legends.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import ScalarFormatter  # noqa: E402

from warpk import stats  # noqa: E402
from warpk.config import RewardConfig  # noqa: E402
from warpk.records import geometric_mean  # noqa: E402
from warpk.report import runtime  # noqa: E402
from warpk.report.analysis import Analysis  # noqa: E402
from warpk.report.breakdowns import energy_pairs, suite_of  # noqa: E402
from warpk.report.energy import EnergyPolicy  # noqa: E402
from warpk.report.metrics import pass_at_k  # noqa: E402
from warpk.report.runs import Run  # noqa: E402
from warpk.rewards import all_terms  # noqa: E402

TERMS = (
    ("correctness", None),
    ("speedup", "alpha_speedup"),
    ("energy", "beta_energy"),
    ("power", "delta_power"),
    ("ipw", "ipw_blend"),
)


def _colours(arms: list[str]) -> dict[str, str]:
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {arm: cycle[i % len(cycle)] for i, arm in enumerate(arms)}


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both coordinates (lower is better), sorted by x."""
    front, best_y = [], math.inf
    for x, y in sorted(points):
        if y < best_y:
            front.append((x, y))
            best_y = y
    return front


def pareto(runs: list[Run], arms: list[str], policy: EnergyPolicy, path: Path) -> Path | str:
    if policy.label == "none":
        return "no run has energy figures (energy_source none everywhere)"
    colours, means = _colours(arms), []
    fig, ax = plt.subplots(figsize=(7, 5))
    for run in runs:
        pts = [
            (r.runtime_ms / r.ref_runtime_ms, r.energy_j / r.ref_energy_j)
            for r in run.records
            if policy.usable(r) and r.runtime_ms and r.ref_runtime_ms
        ]
        if not pts:
            continue
        ax.scatter(*zip(*pts, strict=True), s=14, alpha=0.35, color=colours[run.arm])
        mean = (geometric_mean([p[0] for p in pts]), geometric_mean([p[1] for p in pts]))
        means.append((mean, run))
        ax.scatter(*mean, s=90, marker="D", edgecolor="black", color=colours[run.arm])
    if not means:
        plt.close(fig)
        return "no ok candidate with runtime and usable energy"
    front = pareto_front([m for m, _ in means])
    ax.plot(
        *zip(*front, strict=True),
        "k--",
        lw=1,
        marker="o",
        ms=16,
        mfc="none",
        label="Pareto front of run means",
    )
    drawn = {run.arm for _, run in means}
    for arm in arms:
        if arm in drawn:
            ax.scatter(
                [], [], color=colours[arm], marker="D", edgecolor="black", label=f"{arm} (run geomean)"
            )
    missing = [arm for arm in arms if arm not in drawn]
    if missing:
        ax.annotate(
            f"no ok candidate with energy: {', '.join(missing)}",
            (0.01, 0.01),
            xycoords="axes fraction",
            fontsize=8,
            color="dimgrey",
        )
    ax.scatter([], [], color="grey", alpha=0.35, s=14, label="one ok candidate")
    ax.axvline(1.0, color="grey", lw=0.6)
    ax.axhline(1.0, color="grey", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(ScalarFormatter())
    kind = policy.label.upper() if policy.label != "measured" else "measured"
    ax.set_xlabel("runtime / reference runtime (per call, lower is faster)")
    ax.set_ylabel(f"energy / reference energy (J per call, {kind})")
    ax.set_title(f"Runtime-energy trade-off ({kind} energy)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def pass_vs_turns(analysis: Analysis, path: Path) -> Path | str:
    turns = sorted({r.turns for r in analysis.run_rows})
    if not turns:
        return "no run has records.jsonl"
    if len(turns) < 2:
        return (
            f"all runs use model.turns={turns[0]}; needs runs at two or more turn budgets "
            "(+experiment=single_shot_vs_multiturn)"
        )
    colours = _colours(analysis.arms)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    k_max = min(t.n_candidates for t in analysis.task_rows)
    for arm in analysis.arms:
        for k, style in ((1, "-o"), (k_max, "--s")) if k_max > 1 else ((1, "-o"),):
            xs, ys = [], []
            for t in turns:
                rows = [
                    r
                    for r in analysis.task_rows
                    if r.arm == arm and any(m.turns == t and m.run == r.run for m in analysis.run_rows)
                ]
                values = [pass_at_k(r.n_candidates, r.n_ok, k) for r in rows]
                values = [v for v in values if v is not None]
                if values:
                    xs.append(t)
                    ys.append(sum(values) / len(values))
            if xs:
                ax.plot(xs, ys, style, color=colours[arm], label=f"{arm} pass@{k}")
    ax.set_xlabel("refinement turns (model.turns)")
    ax.set_ylabel("pass@k (mean over tasks, fraction)")
    ax.set_ylim(0, 1.05)
    ax.set_title("pass@k versus turns")
    ax.legend(fontsize=8)
    return _save(fig, path)


def reward_decomposition(runs: list[Run], arms: list[str], path: Path) -> Path | str:
    sums: dict[str, dict[str, float]] = {arm: dict.fromkeys([n for n, _ in TERMS], 0.0) for arm in arms}
    counts = dict.fromkeys(arms, 0)
    for run in runs:
        cfg = RewardConfig(**run.config["reward"])
        for record in run.records:
            terms = all_terms(record, cfg, allow_modelled_energy=False)
            counts[run.arm] += 1
            for name, weight in TERMS:
                value = terms[name] or 0.0
                sums[run.arm][name] += value * (getattr(cfg, weight) if weight else 1.0)
    arms = [a for a in arms if counts[a]]
    if not arms:
        return "no records"
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(arms) + 3), 4.5))
    width = 0.8 / len(TERMS)
    for i, (name, weight) in enumerate(TERMS):
        heights = [sums[a][name] / counts[a] for a in arms]
        label = "correctness (failure tier)" if weight is None else f"{weight} x {name} term"
        ax.bar(
            [j + (i - len(TERMS) / 2 + 0.5) * width for j in range(len(arms))], heights, width, label=label
        )
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(range(len(arms)), arms)
    ax.set_xlabel("arm")
    ax.set_ylabel("mean weighted term per candidate (dimensionless)")
    ax.set_title("Reward decomposition (energy terms: measured energy only, as in training;\n"
                 "a term not measured counts 0 here, as trl's weighted sum treats it)", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def runtime_regimes(runs: list[Run], path: Path) -> Path | str:
    eps = runtime.episodes(runs)
    if not eps:
        return "no run dir has runtime_results.jsonl (stage=runtime, +experiment=runtime_regimes)"
    found = runtime.groups(eps)
    regimes = sorted({(arm, regime) for arm, regime, _ in found})
    policies = sorted({policy for _, _, policy in found})
    fig, (ax_e, ax_s) = plt.subplots(1, 2, figsize=(max(9, 2.2 * len(regimes) + 6), 4.8))
    width = 0.8 / len(policies)
    for i, policy in enumerate(policies):
        xs, energy, low_high, attain = [], [], [], []
        for j, key in enumerate(regimes):
            group = found.get((*key, policy))
            if not group:
                continue
            per_run = runtime.run_means(group, "energy_per_request_j")
            mean = sum(per_run) / len(per_run)
            xs.append(j + (i - len(policies) / 2 + 0.5) * width)
            energy.append(mean)
            low_high.append((mean - min(per_run), max(per_run) - mean))
            attain.append(sum(e.sla_attainment for e in group) / len(group))
        ax_e.bar(xs, energy, width, yerr=list(zip(*low_high, strict=True)) or None, capsize=2, label=policy)
        ax_s.bar(xs, attain, width, label=policy)
    labels = [regime if arm == regime else f"{regime}\n({arm})" for arm, regime in regimes]
    for ax in (ax_e, ax_s):
        ax.set_xticks(range(len(regimes)), labels)
        ax.set_xlabel("SLA regime (arm)")
    ax_e.set_ylabel("energy per request (J, SIMULATED)")
    ax_e.set_title("Energy per request (bars: mean over runs; whiskers: min-max over runs)", fontsize=9)
    ax_s.set_ylabel("SLA attainment (share of requests in limits)")
    ax_s.set_ylim(0, 1.05)
    ax_s.set_title("SLA attainment", fontsize=9)
    ax_s.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Runtime regimes: " + runtime.label(runs), fontsize=8)
    return _save(fig, path)


def seed_robustness(analysis: Analysis, path: Path) -> Path | str:
    rows = analysis.run_rows
    if not rows:
        return "no run has records.jsonl"
    metrics = [("correct_rate", "correct rate (fraction)"), ("geomean_speedup", "speedup (geomean, x)")]
    fig, axes = plt.subplots(1, 2, figsize=(max(7, 1.6 * len(analysis.arms) + 4), 4.2))
    colours = _colours(analysis.arms)
    for ax, (metric, label) in zip(axes, metrics, strict=True):
        for i, arm in enumerate(analysis.arms):
            values = [getattr(r, metric) for r in rows if r.arm == arm and getattr(r, metric) is not None]
            if not values:
                continue
            xs = [i + (j - (len(values) - 1) / 2) * 0.08 for j in range(len(values))]
            ax.plot(xs, values, "o", color=colours[arm], alpha=0.7)
            # speedup on the log scale, as the summary table
            interval = stats.geometric_t_interval if metric == "geomean_speedup" else stats.t_interval
            t = interval(values, 0.95)
            mid, low, high = (t.estimate, t.low, t.high) if t.low is not None else (t.estimate,) * 3
            ax.errorbar([i + 0.3], [mid], yerr=[[mid - low], [high - mid]],
                        fmt="_", color="black", capsize=4, markersize=14)
        ax.set_xticks(range(len(analysis.arms)), analysis.arms, rotation=20, fontsize=8)
        ax.set_xlim(-0.5, len(analysis.arms) - 0.2)
        ax.set_ylabel(label)
        if metric == "correct_rate":
            ax.set_ylim(-0.03, 1.03)
    fig.suptitle("Seed robustness: one dot per seed; black: mean (speedup: geometric) with its 95% "
                 "t-interval over seeds", fontsize=9)
    return _save(fig, path)


def per_level(analysis: Analysis, path: Path) -> Path | str:
    suites = sorted({suite_of(r.task_id) for r in analysis.task_rows})
    if len(suites) < 2:
        return (f"one task suite ({suites[0] if suites else 'none'}); needs runs on two or more "
                "(tasks=kernelbench tasks.level=1,2,3: +experiment=difficulty_stratified)")
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(suites) * len(analysis.arms) / 2 + 3), 4.5))
    width = 0.8 / len(analysis.arms)
    for i, arm in enumerate(analysis.arms):
        heights = []
        for suite in suites:
            mine = [r for r in analysis.task_rows if r.arm == arm and suite_of(r.task_id) == suite]
            n = sum(r.n_candidates for r in mine)
            heights.append(sum(r.n_ok for r in mine) / n if n else math.nan)  # nan: no bar, not a 0
        ax.bar([j + (i - len(analysis.arms) / 2 + 0.5) * width for j in range(len(suites))], heights,
               width, label=arm)
    ax.set_xticks(range(len(suites)), suites)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("correct rate (fraction of candidates, all seeds)")
    ax.set_title("Correct rate by task suite (KernelBench level)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def measured_vs_modelled(runs: list[Run], policy: EnergyPolicy, path: Path) -> Path | str:
    if policy.label != "measured+modelled":
        return (f"energy here is {policy.label}; needs runs of the same candidates with measured and "
                "modelled energy (+experiment=measured_vs_modelled on a GPU)")
    pairs = energy_pairs(runs)
    if not pairs:
        return "no candidate was evaluated both with measured and with modelled energy"
    fig, ax = plt.subplots(figsize=(5.5, 5))
    xs, ys = [p.measured_j for p in pairs], [p.modelled_j for p in pairs]
    ax.loglog(xs, ys, "o", alpha=0.7)
    low, high = min(xs + ys) / 1.5, max(xs + ys) * 1.5
    ax.plot([low, high], [low, high], "k--", lw=0.8, label="modelled = measured")
    ax.set_xlabel("measured energy per call (J)")
    ax.set_ylabel("MODELLED energy per call (J)")
    ax.set_title(f"Measured vs modelled energy, {len(pairs)} candidates")
    ax.legend(fontsize=8)
    return _save(fig, path)


def matched_runtime(analysis: Analysis, path: Path) -> Path | str:
    arms = sorted({p.arm for p in analysis.pairs})
    if not arms:
        return "no matched-runtime pairs (needs energy and candidates within the runtime tolerance)"
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(arms) + 3), 4.5))
    diffs = [[100 * p.energy_diff for p in analysis.pairs if p.arm == arm] for arm in arms]
    ax.boxplot(diffs, showfliers=False)
    for i, values in enumerate(diffs, start=1):
        ax.plot([i + (j % 7 - 3) * 0.03 for j in range(len(values))], values, "o", alpha=0.5, markersize=3)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(range(1, len(arms) + 1), arms)
    ax.set_ylabel(f"energy difference vs {analysis.baseline} (%)")
    ax.set_title("Energy at matched runtime: one dot per pair (below 0: the arm uses less)", fontsize=9)
    return _save(fig, path)


def draw_all(
    runs: list[Run], analysis: Analysis, policy: EnergyPolicy, out_dir: Path
) -> dict[str, Path | str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return {
        "pareto_runtime_energy": pareto(runs, analysis.arms, policy, out_dir / "pareto_runtime_energy.png"),
        "pass_at_k_vs_turns": pass_vs_turns(analysis, out_dir / "pass_at_k_vs_turns.png"),
        "reward_decomposition": reward_decomposition(
            runs, analysis.arms, out_dir / "reward_decomposition.png"
        ),
        "runtime_regimes": runtime_regimes(runs, out_dir / "runtime_regimes.png"),
        "seed_robustness": seed_robustness(analysis, out_dir / "seed_robustness.png"),
        "correct_rate_by_level": per_level(analysis, out_dir / "correct_rate_by_level.png"),
        "measured_vs_modelled": measured_vs_modelled(runs, policy, out_dir / "measured_vs_modelled.png"),
        "matched_runtime_energy": matched_runtime(analysis, out_dir / "matched_runtime_energy.png"),
    }
