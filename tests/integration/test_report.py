"""stage=report on run dirs made by real tiny runs in this module: tables, manifest, figures, rules.

Two arms, two seeds each, on four bundled tasks (CPU, modelled energy). Their jobs say model=m0
and model=m2, which names no arm of an evaluation: the arms are what ran.
  evaluate/reference: `stage=evaluate` of the bundled torch solutions (the baseline);
  evaluate/candidates: `stage=evaluate` of a candidates dir holding the same solutions plus the
      suite's own wrong candidates (kernelbench/negatives), so the failure taxonomy has real failures.
Every number the report shows comes from those runs' records; the tests trace table cells back
to record lines and recompute them.
"""

import csv
import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from tests.conftest import REPO, run_warpk
from warpk.records import EvalRecord

pytestmark = pytest.mark.slow  # the module's runs take about 30 s on 2 cores

TASKS = ["01_softmax", "02_layer_norm", "04_rms_norm", "06_residual_add_layer_norm"]
REFERENCE, CANDIDATES = "evaluate/reference", "evaluate/candidates"
LABEL_COLUMNS = {"arm", "task", "run", "metric", "status", "category", "example error", "paired by"}


def _ok(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report-runs")
    candidates = root / "candidates"
    for task in TASKS:
        (candidates / task).mkdir(parents=True)
        shutil.copy(REPO / "kernelbench" / "solutions" / task / "torch_fused.py", candidates / task)
        for wrong in (REPO / "kernelbench" / "negatives" / task).glob("torch_*.py"):
            shutil.copy(wrong, candidates / task)
    common = [
        "-m",
        "stage=evaluate",  # the arms' names label the evaluations; they train nothing here
        "logger=disabled",
        f"tasks.subset=[{','.join(TASKS)}]",
        "seed=11,22",
        "evaluate.result_cache=false",
        "evaluate.timing_batches=3",  # the report reads records; it does not need tight intervals
        "evaluate.batch_target_ms=5",  # nor long batches
    ]
    _ok(run_warpk(*common, "model=m0", f"hydra.sweep.dir={root / 'sweep' / 'm0'}"))
    _ok(
        run_warpk(
            *common,
            "model=m2",
            f"evaluate.candidates_dir={candidates}",
            f"hydra.sweep.dir={root / 'sweep' / 'm2'}",
        )
    )
    return root


@pytest.fixture(scope="module")
def report(runs) -> Path:
    out = runs / "report"
    _ok(
        run_warpk(
            "stage=report",
            f"results={runs / 'sweep'}",
            "logger=disabled",
            f"hydra.run.dir={out}",
            "report.bootstrap_samples=2000",
        )
    )
    return out


def _tables(path: Path) -> list[list[str]]:
    """Rows (header first) of a Markdown table written by the report."""
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
    return rows


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_report_writes_its_files_and_summary(report):
    summary = json.loads((report / "summary.json").read_text())
    assert summary["n_runs"] == 4 and summary["n_arms"] == 2 and summary["n_tasks"] == 4
    assert summary["energy"] == "modelled"
    for name in (
        "per_task.csv",
        "per_task.jsonl",
        "per_seed.csv",
        "matched_pairs.csv",
        "failure_taxonomy.csv",
        "manifest.json",
        "REPORT.md",
    ):
        assert (report / name).stat().st_size > 0, name
    # a CSV has its header even without rows: CI boxes are too noisy for runtimes within 3%
    with (report / "matched_pairs.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        assert {"task_id", "arm", "baseline", "runtime_diff", "energy_diff"} <= set(reader.fieldnames)
        assert all(abs(float(row["runtime_diff"])) <= 0.03 for row in reader)
    for name in ("per_seed", "per_task", "summary", "comparisons", "matched_runtime", "failure_taxonomy",
                 "per_level", "seed_robustness"):
        assert (report / "tables" / f"{name}.md").is_file() and (report / "tables" / f"{name}.tex").is_file()
    assert "\\begin{tabular}" in (report / "tables" / "summary.tex").read_text()


def _check_traced(report: Path) -> int:
    """Every number of every table has a manifest entry with the same text whose sources exist;
    returns how many numbers were checked."""
    manifest = json.loads((report / "manifest.json").read_text())
    cells = {(c["table"], c["row"], c["column"]): c for c in manifest["cells"]}
    checked = 0
    for md in sorted((report / "tables").glob("*.md")):
        header, *rows = _tables(md)
        for r, row in enumerate(rows):
            for column, text in zip(header, row, strict=True):
                if column in LABEL_COLUMNS or not _is_number(text):
                    continue
                cell = cells[(md.stem, r, column)]
                assert cell["text"] == text
                assert cell["sources"], (md.stem, r, column)
                for source in cell["sources"]:
                    assert source["run_dir"] in manifest["runs"]
                    n_lines = len(Path(source["run_dir"], source["file"]).read_text().splitlines())
                    assert all(1 <= line <= n_lines for line in source["lines"])
                checked += 1
    for run_dir, run in manifest["runs"].items():
        digest = hashlib.sha256(Path(run_dir, "resolved_config.yaml").read_bytes()).hexdigest()
        assert run["config_sha256"] == digest
        recorded = json.loads(Path(run_dir, "summary.json").read_text())["git_commit"]
        assert run["git_commit"] == recorded and run["git_commit_source"] == "run dir"
    return checked


def test_every_table_number_is_in_the_manifest_with_existing_sources(report):
    assert _check_traced(report) > 100


def _records(source) -> list[EvalRecord]:
    lines = Path(source["run_dir"], "records.jsonl").read_text().splitlines()
    return [EvalRecord.from_json(lines[i - 1]) for i in source["lines"]]


def test_a_cell_recomputed_from_its_records_equals_the_table(report):
    """per_task correct rate = mean over the arm's runs of the fraction of ok records."""
    manifest = json.loads((report / "manifest.json").read_text())
    cells = [c for c in manifest["cells"] if c["table"] == "per_task" and c["column"] == "correct rate"]
    assert len(cells) == 8  # 2 arms x 4 tasks
    for cell in cells:
        per_run = [np.mean([r.status == "ok" for r in _records(s)]) for s in cell["sources"]]
        assert len(per_run) == 2  # two seeds
        assert format(np.mean(per_run), ".3f") == cell["text"]
    wrong = [c for c in cells if c["text"] != "1.000"]
    assert wrong, "the candidates arm holds wrong candidates: some correct rate must be below 1"


def test_paired_test_is_scipys_wilcoxon_on_the_per_task_values(report):
    rows = [json.loads(line) for line in (report / "per_task.jsonl").read_text().splitlines()]
    mean = {}
    for arm in (REFERENCE, CANDIDATES):
        for task in sorted({r["task_id"] for r in rows}):
            mean[arm, task] = np.mean(
                [r["correct_rate"] for r in rows if r["arm"] == arm and r["task_id"] == task]
            )
    tasks = sorted({r["task_id"] for r in rows})
    expected = sps.wilcoxon([mean[CANDIDATES, t] for t in tasks], [mean[REFERENCE, t] for t in tasks])
    header, *table = _tables(report / "tables" / "comparisons.md")
    row = dict(zip(header, next(r for r in table if r[1] == "correct rate"), strict=True))
    assert row["arm"] == CANDIDATES and row["pairs"] == "4"  # tested against the reference
    assert row["p"] == format(expected.pvalue, ".3g")
    assert float(row["rank-biserial r"]) < 0  # the candidates are less often correct
    # 4 tasks: no p below 2 / 2^4 = 0.125, so the table says its design cannot reach significance
    assert float(row["min p"]) >= 0.125
    assert "This design cannot reach significance" in (report / "tables" / "comparisons.md").read_text()


def test_per_level_and_seed_robustness_recompute_from_the_records(runs, report):
    """per_level: the suite's correct rate is the mean over seeds of each run's share of ok
    records; seed_robustness lists each seed's own correct rate, which per_seed shows too."""
    header, *rows = _tables(report / "tables" / "per_level.md")
    row = dict(zip(header, next(r for r in rows if r[0] == CANDIDATES), strict=True))
    assert row["suite"] == "bundled" and row["tasks"] == "4" and row["runs"] == "2"
    per_run = []
    for path in sorted((runs / "sweep" / "m2").glob("*/records.jsonl")):
        records = [EvalRecord.from_json(line) for line in path.read_text().splitlines()]
        per_run.append(np.mean([r.status == "ok" for r in records]))
    assert row["correct rate"] == format(np.mean(per_run), ".3f")
    half = sps.t.ppf(0.975, 1) * np.std(per_run, ddof=1) / np.sqrt(2)  # 0 when both seeds agree
    assert row["t low"] == format(np.mean(per_run) - half, ".3f")
    assert row["t high"] == format(np.mean(per_run) + half, ".3f")
    header, *rows = _tables(report / "tables" / "seed_robustness.md")
    found = next(r for r in rows if r[0] == CANDIDATES and r[1] == "correct rate")
    row = dict(zip(header, found, strict=True))
    by_seed = dict(pair.split(": ") for pair in row["values by seed"].split(", "))
    assert sorted(by_seed) == ["11", "22"]
    assert sorted(by_seed.values()) == sorted(format(v, ".3f") for v in per_run)
    assert row["sd"] == format(np.std(per_run, ddof=1), ".3f")


def test_failure_taxonomy_counts_the_failed_records(runs, report):
    """Per arm, the table's counts add up to the arm's failed records (the candidates arm holds the
    suite's wrong candidates; the reference arm normally none, but a loaded machine can make a
    measurement fail, and the table must count that too)."""
    header, *rows = _tables(report / "tables" / "failure_taxonomy.md")
    rows = [dict(zip(header, r, strict=True)) for r in rows]
    for arm, sweep in ((CANDIDATES, "m2"), (REFERENCE, "m0")):
        failed = [
            record
            for path in (runs / "sweep" / sweep).glob("*/records.jsonl")
            for record in map(EvalRecord.from_json, path.read_text().splitlines())
            if record.status != "ok"
        ]
        assert sum(int(r["count"]) for r in rows if r["arm"] == arm) == len(failed)
    assert any(r["arm"] == CANDIDATES for r in rows)


def test_figures_are_drawn_or_their_absence_explained(report):
    assert (report / "figures" / "pareto_runtime_energy.png").stat().st_size > 10_000
    assert (report / "figures" / "reward_decomposition.png").stat().st_size > 10_000
    text = (report / "REPORT.md").read_text()
    assert "pass_at_k_vs_turns: absent: all runs use model.turns=1" in text
    assert "runtime_regimes: absent: no run dir has runtime_results.jsonl" in text
    assert (report / "figures" / "seed_robustness.png").stat().st_size > 10_000
    assert "correct_rate_by_level: absent: one task suite (bundled)" in text
    assert "measured_vs_modelled: absent: energy here is modelled" in text
    assert "Energy is MODELLED" in (report / "tables" / "per_seed.md").read_text()


def test_measured_and_modelled_energy_are_not_compared_unless_asked(runs, tmp_path):
    # one m0 run relabelled as if its energy had been measured: the report must refuse the mix
    mixed = tmp_path / "mixed"
    shutil.copytree(runs / "sweep" / "m2", mixed / "m2")
    shutil.copytree(runs / "sweep" / "m0" / "0", mixed / "m0")
    records = mixed / "m0" / "records.jsonl"
    records.write_text(records.read_text().replace('"energy_source": "model"', '"energy_source": "nvml"'))
    refused = run_warpk(
        "stage=report", f"results={mixed}", "logger=disabled", f"hydra.run.dir={tmp_path / 'r1'}"
    )
    assert refused.returncode != 0
    assert "refusing to compare" in refused.stderr and "allow_modelled_energy_compare=true" in refused.stderr
    allowed = _ok(
        run_warpk(
            "stage=report",
            f"results={mixed}",
            "logger=disabled",
            "report.allow_modelled_energy_compare=true",
            f"hydra.run.dir={tmp_path / 'r2'}",
        )
    )
    assert json.loads((tmp_path / "r2" / "summary.json").read_text())["energy"] == "measured+modelled"
    assert "energy ratio (measured+modelled)" in (tmp_path / "r2" / "tables" / "per_seed.md").read_text()
    # the same solutions, evaluated with "measured" (relabelled) and modelled energy, side by side
    header, *rows = _tables(tmp_path / "r2" / "tables" / "measured_vs_modelled.md")
    every = dict(zip(header, rows[-1], strict=True))
    assert every["task"] == "all" and int(every["candidates"]) >= len(TASKS)
    assert len(rows) == len(TASKS) + 1
    assert (tmp_path / "r2" / "figures" / "measured_vs_modelled.png").stat().st_size > 10_000
    assert allowed.returncode == 0


@pytest.mark.parametrize(
    "override, message",
    [
        ("results=/no/such/dir", "results=/no/such/dir matches no directory"),
        (
            "report.baseline_arm=m9",
            "report.baseline_arm='m9' is not an arm of these runs; "
            "allowed: evaluate/candidates, evaluate/reference",
        ),
        ("report.arm_keys=[model.nope]", "has no key 'model.nope'"),
    ],
)
def test_bad_input_fails_with_one_line(runs, tmp_path, override, message):
    args = [f"results={runs / 'sweep'}", override] if "results=" not in override else [override]
    result = run_warpk("stage=report", "logger=disabled", f"hydra.run.dir={tmp_path}", *args)
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "summary.json").exists()


def test_an_arm_never_pools_runs_that_differ_in_more_than_their_seed(runs, tmp_path):
    source = runs / "sweep" / "m0" / "0"
    twice = tmp_path / "twice"  # the same run twice: one seed counted as two
    shutil.copytree(source, twice / "a")
    shutil.copytree(source, twice / "b")
    report = ("stage=report", f"results={twice}", "logger=disabled")
    result = run_warpk(*report, f"hydra.run.dir={tmp_path / 'r1'}")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"arm '{REFERENCE}' has two runs of seed 11" in result.stderr
    # another seed, and another timing budget: not the same experiment
    config = twice / "b" / "resolved_config.yaml"
    text = config.read_text().replace("seed: 11", "seed: 99")
    config.write_text(text.replace("timing_batches: 3", "timing_batches: 9"))
    result = run_warpk(*report, f"hydra.run.dir={tmp_path / 'r2'}")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"arm '{REFERENCE}' mixes runs that differ in evaluate.timing_batches" in result.stderr


def test_report_reads_a_train_run_and_agrees_with_its_summary(tmp_path):
    """stage=train (M0 SFT, tiny policy) writes held-out records; the report's pass@1 and failure
    counts must equal what the train stage itself summarised."""
    train = tmp_path / "train"
    # one held-out sample per task (the smoke default is 2): the report must agree with whatever
    # the train stage summarised, and half the samples take 2.5 s less
    _ok(run_warpk("stage=train", "model=m0", "policy=tiny", "logger=disabled", "train.samples_per_task=1",
                  f"hydra.run.dir={train}"))
    out = tmp_path / "report"
    _ok(
        run_warpk(
            "stage=report",
            f"results={train}",
            "logger=disabled",
            "report.figures=false",
            f"hydra.run.dir={out}",
        )
    )
    own = json.loads((train / "summary.json").read_text())
    header, row = _tables(out / "tables" / "per_seed.md")
    row = dict(zip(header, row, strict=True))
    assert row["pass@1"] == format(own["pass_at_1"], ".3f")
    assert row["correct rate"] == format(own["correct_rate"], ".3f")
    header, *rows = _tables(out / "tables" / "failure_taxonomy.md")
    failed = own["n_candidates"] - own["n_ok"]
    assert sum(int(dict(zip(header, r, strict=True))["count"]) for r in rows) == failed


def test_runtime_runs_give_regime_tables_and_figure(tmp_path):
    """stage=runtime (M4) on the test calibration fixture, two seeds: the report recomputes the
    policies' energy per request from the episode lines and labels it SIMULATED and FIXTURE."""
    sweep = tmp_path / "runtime"
    _ok(
        run_warpk(
            "-m",
            "stage=runtime",
            "model=m4",
            "sla=throughput",
            "seed=11,22",
            "logger=disabled",
            "runtime.calibration=tests/data/runtime_calibration_fixture.json",
            "runtime.allow_fixture_calibration=true",
            "runtime.ppo.timesteps=64",
            "runtime.episode_steps=8",
            "runtime.selection.tuning_seeds=1",
            "runtime.actuator.power_cap_step_w=300",  # the statics' grids: 30 settings, not 90
            f"hydra.sweep.dir={sweep}",
        )
    )
    out = tmp_path / "report"
    _ok(run_warpk("stage=report", f"results={sweep}", "logger=disabled", f"hydra.run.dir={out}"))
    assert _check_traced(out) > 50
    assert (out / "figures" / "runtime_regimes.png").stat().st_size > 10_000
    text = (out / "tables" / "runtime_policies.md").read_text()
    assert "SIMULATED" in text and "FIXTURE" in text
    episodes = [
        json.loads(line)
        for path in sorted(sweep.glob("*/runtime_results.jsonl"))
        for line in path.read_text().splitlines()
    ]
    episodes = [e for e in episodes if not e.get("summary")]

    def energy(policy):
        return [e["energy_per_request_j"] for e in episodes if e["policy"] == policy]

    header, *rows = _tables(out / "tables" / "runtime_policies.md")
    row = dict(zip(header, next(r for r in rows if r[2] == "static max"), strict=True))
    assert row["runs"] == "2" and row["episodes"] == str(len(energy("static max")))
    expected = sps.wilcoxon(energy("M4 PPO"), energy("static max"))
    header, *rows = _tables(out / "tables" / "runtime_tests.md")
    row = dict(zip(header, next(r for r in rows if r[2] == "static max"), strict=True))
    assert row["p"] == format(expected.pvalue, ".3g")
