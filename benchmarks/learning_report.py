"""What benchmarks/bench_learning.py makes of its seeds: the statistics over seeds (each arm's
95% t-interval and the paired M1 - M0 difference), the table, the figure, and `--merge` (one
summary of the seeds of several runs of one design, e.g. a claim run made in several sittings)."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import shorten

from warpk.stats import t_interval


def interval(values: list[float]) -> dict:
    iv = t_interval(values, 0.95)
    return {"mean": iv.estimate, "low": iv.low, "high": iv.high, "n": iv.n, "note": iv.reason}


def summarise(seeds: list[dict], shared_m0: bool = False) -> dict:
    """Per metric: both arms' intervals over seeds and the paired difference. With one shared M0
    (`--m0-seed`) its held-out figure is one measurement, not a spread: that metric is left out. A
    metric some seed lacks (the held-out `ok` speedup where an arm had no `ok` record) is left out."""
    out = {}
    metrics = ("reward", "correct_rate") if shared_m0 else (
        "reward", "correct_rate", "heldout_correct_rate", "heldout_reward", "heldout_ok_speedup")
    for metric in metrics:
        m0 = [s["m0"].get(metric) for s in seeds]
        m1 = [s["m1"].get(metric) for s in seeds]
        if None in m0 or None in m1:
            continue
        out[metric] = {
            "m0": interval(m0),
            "m1": interval(m1),
            "m1_minus_m0": interval([b - a for a, b in zip(m0, m1, strict=True)]),
        }
        both = out[metric]
        both["m1_above_m0_beyond_intervals"] = (
            both["m0"]["high"] is not None
            and both["m1"]["low"] is not None
            and both["m1"]["low"] > both["m0"]["high"]
        )
    return out


def _num(value) -> str:
    """A figure to 3 decimals, or "-" where it was not measured (older runs, no ok record)."""
    return "-" if value is None else f"{value:.3f}"


def _fmt(iv: dict) -> str:
    if iv["low"] is None:
        return f"{iv['mean']:.3f} ({iv['note']})"
    return f"{iv['mean']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]"


def design_line(meta: dict) -> str:
    if meta.get("m0_seed") is None:
        return "Design: one M0 per seed (SFT, M0 evaluation and GRPO all drawn from the seed)."
    sft = f"{meta['m0_train_s']:.0f} s" if meta["m0_train_s"] else "reused from --m0-from"
    return (
        f"Design: ONE M0 (SFT with seed {meta['m0_seed']}, {sft}) for every seed; a seed draws GRPO's "
        "stream and both evaluations' samples, so M0's interval is its evaluation noise only. Its "
        "held-out figure is one measurement (no interval)."
    )


def markdown(meta: dict, seeds: list[dict], summary: dict, label: str) -> str:
    lines = [
        f"# Learning benchmark ({', '.join(meta.get('dates', [meta['date']]))}, {meta['machine']})",
        "",
        f"`{meta['command']}`",
        "",
        f"policy=small (train=small_cpu), {label}; {meta['k']} samples per task per "
        "evaluation; reward = reward=kernel's total. Energy is not used (CPU).",
        "",
        design_line(meta),
        "",
        "| seed | M0 reward | M0 correct | M1 reward | M1 correct | M0 held-out correct "
        "| M1 held-out correct | M0 held-out reward | M1 held-out reward | M0 held-out ok speedup "
        "| M1 held-out ok speedup | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in seeds:
        m0, m1 = s["m0"], s["m1"]
        held = [_num(arm.get(key)) for key in ("heldout_reward", "heldout_ok_speedup") for arm in (m0, m1)]
        lines.append(
            f"| {s['seed']} | {m0['reward']:.3f} | {m0['correct_rate']:.3f} | {m1['reward']:.3f} | "
            f"{m1['correct_rate']:.3f} | {m0['heldout_correct_rate']} | {m1['heldout_correct_rate']} | "
            f"{' | '.join(held)} | {sum(s['wall_s'].values()):.0f} |"
        )
    lines += ["", "| metric | M0 mean [95% t] | M1 mean [95% t] | M1 - M0 paired [95% t] "
              "| M1 above M0 beyond intervals |",
              "|---|---|---|---|---|"]  # fmt: skip
    for metric, v in summary.items():
        lines.append(f"| {metric} | {_fmt(v['m0'])} | {_fmt(v['m1'])} | {_fmt(v['m1_minus_m0'])} | "
                     f"{v['m1_above_m0_beyond_intervals']} |")  # fmt: skip
    lines += ["", f"Total wall time: {meta['wall_s']:.0f} s.", ""]
    return "\n".join(lines)


SMOOTH_STEPS = 8  # the per-step curves average 16 samples: a trailing mean over 8 steps to read them


def smoothed(values: list, window: int = SMOOTH_STEPS) -> list[float]:
    """Trailing mean over the last `window` steps (fewer at the start); None steps are skipped."""
    out = []
    for i in range(len(values)):
        seen = [v for v in values[max(0, i - window + 1) : i + 1] if v is not None]
        out.append(sum(seen) / len(seen) if seen else float("nan"))
    return out


def heldout_panel(ax, seeds: list[dict], paired: dict | None) -> None:
    """Held-out correct rate per seed, M0 and M1 joined by a line (the pairing), and each arm's
    mean with its 95% t-interval over seeds as an error bar."""
    for s in seeds:
        ax.plot([0, 1], [s["m0"]["heldout_correct_rate"], s["m1"]["heldout_correct_rate"]],
                color="grey", marker="o", alpha=0.6, linewidth=1)
        ax.annotate(f"seed {s['seed']}", (1.03, s["m1"]["heldout_correct_rate"]), fontsize=7)
    for x, arm, color in ((-0.15, "m0", "C3"), (1.15, "m1", "C2")):
        iv = (paired or {}).get(arm)
        if iv and iv["low"] is not None:
            ax.errorbar([x], [iv["mean"]], yerr=[[iv["mean"] - iv["low"]], [iv["high"] - iv["mean"]]],
                        color=color, marker="s", capsize=4, label=f"{arm.upper()} mean, 95% t")
    diff = (paired or {}).get("m1_minus_m0")
    if diff and diff["low"] is not None:
        span = f"[{diff['low']:+.3f}, {diff['high']:+.3f}]"
        ax.set_title(f"held-out: M1 - M0 paired {diff['mean']:+.3f} {span}", fontsize=9)
    ax.set_xticks([0, 1], ["M0", "M1"])
    ax.set_xlim(-0.4, 1.4)
    ax.set_ylabel("held-out correct rate")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")


def figure(seeds: list[dict], summary: dict, path: Path, label: str) -> None:
    """Per metric: each seed's GRPO curve (trailing mean, thin), their mean (thick), and the two
    evaluations as bands: M0's and M1's mean with its 95% t-interval over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    held = [s for s in seeds if s["m0"].get("heldout_correct_rate") is not None
            and s["m1"].get("heldout_correct_rate") is not None]
    fig, axes = plt.subplots(1, 3 if held else 2, figsize=(16 if held else 11, 4.2))
    if held:
        heldout_panel(axes[2], held, summary.get("heldout_correct_rate"))
    for ax, metric, ylabel in (
        (axes[0], "reward", "mean train reward"),
        (axes[1], "correct_rate", "correct rate"),
    ):
        curves = [  # per seed: {step: smoothed value}
            dict(zip(s["m1_curves"]["step"], smoothed(s["m1_curves"][metric]), strict=True)) for s in seeds
        ]
        curves = [c for c in curves if c]
        for curve in curves:
            ax.plot(list(curve), list(curve.values()), color="C0", alpha=0.25, linewidth=1)
        common = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        if common:
            mean = [sum(c[step] for c in curves) / len(curves) for step in common]
            note = f"M1 GRPO samples, mean of {len(curves)} seeds ({SMOOTH_STEPS}-step mean)"
            ax.plot(common, mean, color="C0", linewidth=2.2, label=note)
        for arm, color in (("m0", "C3"), ("m1", "C2")):
            iv = summary.get(metric, {}).get(arm)
            if iv is None:
                continue
            note = f"{arm.upper()} evaluated ({seeds[0][arm]['n']} samples a seed): mean, 95% t"
            ax.axhline(iv["mean"], color=color, linestyle="--", linewidth=1.5, label=note)
            if iv["low"] is not None:
                ax.axhspan(iv["low"], iv["high"], color=color, alpha=0.15)
        ax.set_xlabel("GRPO optimizer step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"policy=small, {shorten(label, 110, placeholder=' ...')} (CPU): M1 warm-started from M0, "
        f"{len(seeds)} seeds"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write(out: Path, meta: dict, seeds: list[dict], summary: dict, label: str) -> None:
    """bench_learning.json, .md and learning_curves.png in `out`; the table printed too."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_learning.json").write_text(json.dumps({"meta": meta, "seeds": seeds, "summary": summary},
                                                        indent=2))
    (out / "bench_learning.md").write_text(markdown(meta, seeds, summary, label))
    figure(seeds, summary, out / "learning_curves.png", label)
    print(markdown(meta, seeds, summary, label))


def merge(folders: list[Path], out: Path) -> None:
    """One summary of the seeds of several runs of ONE design (same suite, k, M0 design and
    commit; each seed once), e.g. the seeds of a claim run made in several sittings."""
    runs = [json.loads((f / "bench_learning.json").read_text()) for f in folders]
    metas = [r["meta"] for r in runs]
    differ = [key for key in ("tasks", "k", "m0_seed", "commit")
              if len({json.dumps(m.get(key)) for m in metas}) > 1]
    if differ:
        raise SystemExit(f"--merge: the runs differ in {', '.join(differ)}: not one design, not merged")
    seeds = [s for r in runs for s in r["seeds"]]
    numbers = [s["seed"] for s in seeds]
    if len(set(numbers)) < len(numbers):
        raise SystemExit(f"--merge: a seed appears twice ({sorted(numbers)}): not merged")
    meta = {**metas[0], "command": " ; ".join(m["command"] for m in metas),
            "wall_s": sum(m["wall_s"] for m in metas), "merged_from": [str(f) for f in folders],
            "dates": sorted({m["date"] for m in metas})}
    tasks = meta["tasks"]
    label = tasks if isinstance(tasks, str) else f"tasks {', '.join(tasks)}"
    summary = summarise(seeds, meta.get("m0_seed") is not None)
    write(out, meta, seeds, summary, label)


AGAINST = (("heldout_correct_rate", "held-out correct"), ("heldout_reward", "held-out reward"),
           ("heldout_ok_speedup", "held-out ok speedup"), ("correct_rate", "train-split correct"),
           ("reward", "train-split reward"))


def against(seeds: list[dict], folder: Path) -> str:
    """Each seed's figures beside the same seed's in an earlier run's folder (e.g. the committed
    claim, which `make reproduce` re-runs one seed of): a table, with the earlier run's commit."""
    earlier = json.loads((folder / "bench_learning.json").read_text())
    by_seed = {s["seed"]: s for s in earlier["seeds"]}
    lines = [f"Beside {folder} (commit {earlier['meta'].get('commit')}, {earlier['meta']['date']}):", "",
             "| seed | arm | figure | this run | earlier run |", "|---|---|---|---|---|"]
    for s in seeds:
        before = by_seed.get(s["seed"])
        if before is None:
            lines.append(f"| {s['seed']} | - | - | - | not in {folder} |")
            continue
        for arm in ("m0", "m1"):
            for key, name in AGAINST:
                lines.append(f"| {s['seed']} | {arm.upper()} | {name} | {_num(s[arm].get(key))} | "
                             f"{_num(before[arm].get(key))} |")
    return "\n".join(lines) + "\n"
