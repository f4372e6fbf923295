"""Trusted code checked in this process by the evaluator's rule: the synthetic tasks' execution
filter (warpk.synthetic.suite) keeps a generated solution only if it matches its reference
(checks.check_correct: shape, dtype, per-dtype tolerance) on fresh inputs and leaves its inputs
unchanged.

Both files are the generator's own code, never a candidate's, so they run here, unsandboxed
(milliseconds a task, where the sandboxed pipeline takes seconds): `check_solution` returns
None or the reason it failed. The whole evaluator takes a sample of the same solutions in
tests/integration/test_synthetic.py.

Non-goals: no candidate code (that is the sandboxed pipeline's), no timing.
"""

from __future__ import annotations

import types

from warpk.config import EvaluateConfig

TRIALS = 3


def _module(source: str, filename: str) -> types.ModuleType:
    module = types.ModuleType(filename.removesuffix(".py"))
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - the generator's own code
    return module


def check_solution(problem: str, solution: str, seed: int = 0, shape: str = "cpu",
                   settings: EvaluateConfig | None = None) -> str | None:
    """None if `solution`'s ModelNew matches `problem`'s Model at `shape` on TRIALS input draws
    (same init seed for both); else why not, in one line."""
    import torch

    from warpk.evaluator.checks import Verdict, check_correct, same_inputs

    settings = settings or EvaluateConfig()
    try:
        task = _module(problem, "task.py")
        for key, value in getattr(task, "SHAPES", {}).get(shape, {}).items():
            setattr(task, key, value)
        new = _module(solution, "solution.py")
        init = list(task.get_init_inputs())
        torch.manual_seed(seed)
        model = task.Model(*init).eval()
        torch.manual_seed(seed)
        model_new = new.ModelNew(*init).eval()
        with torch.no_grad():
            for trial in range(TRIALS):
                torch.manual_seed(seed + 1 + trial)
                inputs = task.get_inputs()
                pristine = [x.clone() for x in inputs]
                expected = model(*inputs)
                got = model_new(*inputs)
                if not same_inputs(torch, inputs, pristine):
                    return "the solution modified its inputs in place"
                check_correct(torch, expected, got, settings, f"trial {trial}")
    except Verdict as verdict:
        return verdict.reason
    except Exception as err:  # noqa: BLE001 - a generated file that fails is filtered out, with why
        return f"{type(err).__name__}: {err}"[:300]
    return None
