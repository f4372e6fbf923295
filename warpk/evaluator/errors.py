"""Failures of the evaluator itself, which are never a candidate's verdict.

`HarnessFailure` leaves `Evaluator.evaluate_many` when what measures a candidate broke, not the
candidate: the task's reference cannot be loaded, built or run (the trusted worker answers
status "harness_error" before any candidate code ran), the trusted worker died, or an exception
escaped a lane. Scoring such a record would turn our bug into a reward or a summary entry, so
the run stops instead (`python -m warpk` prints one line and exits with status 2); the record is
neither cached nor emitted.

Non-goals: no recovery (a broken task or environment stays broken for every candidate).
"""

from __future__ import annotations

# The Measurement status the trusted worker answers when the task's reference failed before any
# candidate code ran (its error is one line); never an EvalRecord status.
HARNESS_ERROR = "harness_error"


class HarnessError(Exception):
    """Inside the trusted worker: our side failed (the task's reference cannot be loaded, built or
    run, the reference worker died, the worker's memory cannot be read): never the candidate's
    verdict. The worker answers HARNESS_ERROR and the parent stops the run on it."""


class HarnessFailure(RuntimeError):
    """The evaluator, not the candidate, failed; the message is one line that names the task."""
