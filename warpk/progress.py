"""Progress of long work, seen wherever the run is watched.

`progress(console, label, total, log, key=label, initial=0)` is a context manager that yields
`update(done, note="")`:
- on a terminal, a rich bar with done/total, elapsed time and an ETA;
- elsewhere (SLURM logs, pipes), one line each time another tenth is done, with the ETA;
- to W&B (`log`), `progress/<key>` (fraction done) and `progress/<key>_eta_s` each time
  another twentieth is done.
The ETA is the rate so far applied to what is left: elapsed x (total - done) / (done - initial),
where `initial` is what was already done when it started (a resumed job's kept records).

Non-goals: no nesting, no threads (call `update` from the loop that does the work).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

LINES = 10  # lines printed over a run where there is no terminal
LOGS = 20  # W&B points over a run


def eta_s(elapsed_s: float, done: int, total: int, initial: int = 0) -> float | None:
    """Seconds left at the rate so far; None before anything is done here."""
    if done <= initial:
        return None
    return elapsed_s * max(total - done, 0) / (done - initial)


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


@contextmanager
def progress(
    console: Console,
    label: str,
    total: int,
    log: Callable[[dict], None] | None = None,
    key: str | None = None,
    initial: int = 0,
) -> Iterator[Callable[..., None]]:
    start = time.monotonic()
    total = max(int(total), 1)
    state = {"line": initial * LINES // total, "logged": initial * LOGS // total}
    key = key or label

    def report(done: int) -> None:
        elapsed = time.monotonic() - start
        eta = eta_s(elapsed, done, total, initial)
        if log is not None and done * LOGS >= (state["logged"] + 1) * total:
            state["logged"] = done * LOGS // total
            log({f"progress/{key}": done / total, f"progress/{key}_eta_s": eta})
        if not console.is_terminal and done * LINES >= (state["line"] + 1) * total:
            state["line"] = done * LINES // total
            console.print(
                f"{label}: {done / total:.0%} ({done}/{total}), {clock(elapsed)} elapsed, ETA {clock(eta)}"
            )

    if not console.is_terminal:
        console.print(f"{label}: {total - initial} to do" + (f" ({initial} done before)" if initial else ""))

        def update(done: int, note: str = "") -> None:
            report(done)

        yield update
        return
    with Progress(
        TextColumn(f"[bold]{label}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar_progress:
        bar = bar_progress.add_task("", total=total, completed=initial)

        def update(done: int, note: str = "") -> None:
            bar_progress.update(bar, completed=done, description=note)
            report(done)

        yield update
