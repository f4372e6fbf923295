"""warpk.progress: lines with an ETA where there is no terminal, the fraction and ETA to W&B."""

import io

from rich.console import Console

from warpk.progress import clock, eta_s, progress


def test_without_a_terminal_it_prints_a_line_per_tenth_and_logs_every_twentieth():
    out, logged = io.StringIO(), []
    console = Console(file=out, force_terminal=False, width=200)
    with progress(console, "PPO", 1000, logged.append) as update:
        for done in range(0, 1001, 5):
            update(done)
    lines = out.getvalue().splitlines()
    assert lines[0] == "PPO: 1000 to do"
    assert len(lines) == 1 + 10 and lines[1].startswith("PPO: 10% (100/1000)") and "ETA" in lines[1]
    assert lines[-1].startswith("PPO: 100% (1000/1000)") and lines[-1].endswith("ETA 0 s")
    assert len(logged) == 20 and logged[-1]["progress/PPO"] == 1.0 and logged[-1]["progress/PPO_eta_s"] == 0
    assert [round(x["progress/PPO"], 2) for x in logged[:2]] == [0.05, 0.1]


def test_the_eta_is_the_rate_so_far():
    assert eta_s(10.0, 25, 100) == 30.0 and eta_s(10.0, 0, 100) is None
    assert clock(125) == "2 min 05 s" and clock(7.4) == "7 s" and clock(None) == "?"


def test_on_a_terminal_it_draws_a_bar_and_still_logs():
    logged = []
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with progress(console, "evaluate", 4, logged.append) as update:
        for done in range(1, 5):
            update(done, f"item {done}")
    assert [x["progress/evaluate"] for x in logged] == [0.25, 0.5, 0.75, 1.0]


def test_a_resumed_run_counts_only_what_it_did_itself():
    out, logged = io.StringIO(), []
    console = Console(file=out, force_terminal=False, width=200)
    with progress(console, "evaluate", 1000, logged.append, key="eval", initial=500) as update:
        update(600)
    first, line = out.getvalue().splitlines()
    assert first == "evaluate: 500 to do (500 done before)"
    assert line.startswith("evaluate: 60% (600/1000)")  # the kept records print no lines of their own
    assert logged == [{"progress/eval": 0.6, "progress/eval_eta_s": logged[0]["progress/eval_eta_s"]}]
    assert logged[0]["progress/eval_eta_s"] > 0  # 400 left at the rate of the 100 done here
    assert eta_s(10.0, 600, 1000, initial=500) == 40.0
