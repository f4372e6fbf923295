"""Reports from run dirs on disk (DESIGN.md 4.7, docs/reports.md): `stage=report results=...`.

    runs.py      find and load run dirs (one dir, a sweep dir, a glob); config hash, git commit
    metrics.py   per-task metrics and per-run aggregates from records.jsonl, each with its sources
    energy.py    measured-vs-modelled energy rule; matched-runtime pairs
    failures.py  failure taxonomy: status counts and error categories
    breakdowns.py  per task suite, seed robustness, measured vs modelled energy
    manifest.py  every table number -> run dirs, config hashes, git commits, record lines
    console.py   tables of evaluation records for the stages' console output
    figures.py   Pareto front, pass@k vs turns, reward decomposition, runtime regimes, seed
                 robustness, correct rate by suite, measured vs modelled, matched runtime (PNG)

The table type itself (cells with sources; rich, Markdown and LaTeX renderers) is warpk.tables,
and the statistics (t-interval, bootstrap, Wilcoxon + effect size, Holm) are warpk.stats, both
shared with every stage.

Non-goals: no measuring and no training; nothing here invents a number. A figure or test whose
data is not in the run dirs is left out and the report says why.
"""
