"""Reports from run dirs on disk (DESIGN.md 4.7, docs/reports.md): `stage=report results=...`.

    runs.py      find and load run dirs (one dir, a sweep dir, a glob); config hash, git commit
    metrics.py   per-task metrics and per-run aggregates from records.jsonl, each with its sources
    stats.py     t-interval over seeds, bootstrap over tasks, Wilcoxon + effect size, Holm
    energy.py    measured-vs-modelled energy rule; matched-runtime pairs
    failures.py  failure taxonomy: status counts and error categories
    tables.py    tables whose every number names its sources; Markdown, LaTeX, the manifest
    console.py   rich tables of evaluation records for the stages' console output
    figures.py   Pareto front, pass@k vs turns, reward decomposition, runtime regimes (PNG)

Non-goals: no measuring and no training; nothing here invents a number. A figure or test whose
data is not in the run dirs is left out and the report says why.
"""
