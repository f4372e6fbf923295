"""Host memory the CPU protocol needs for a task, sized before anything is allocated.

On the CPU an allocation past the RAM ends in the kernel's OOM killer, not an error, so the
trusted worker sizes a task's inputs and the reference's outputs on torch's meta device first.

Non-goals: no GPU memory (CUDA raises a catchable error there).
"""

from __future__ import annotations

from warpk.evaluator.checks import flatten


def host_peak_bytes(torch, task) -> int | None:
    """A lower bound of the host bytes the protocol holds at its peak for one call of `task` on
    the CPU, from its inputs (I) and the reference's outputs (O) sized on the meta device: the
    big-task path's max(2I, I + 2O) in the workers plus the memfds that carry I and O
    (docs/evaluator.md section 3); None when the task cannot be sized that way."""
    try:
        with torch.device("meta"):
            torch.manual_seed(0)
            inputs = list(task.get_inputs())
            model = task.Model(*task.get_init_inputs())
            outputs = flatten(model(*inputs))
    except Exception:  # noqa: BLE001 - data-dependent code: not checkable without data
        return None
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    outs = [t for t in outputs if isinstance(t, torch.Tensor)]
    in_bytes = sum(t.numel() * t.element_size() for t in tensors)
    out_bytes = sum(t.numel() * t.element_size() for t in outs)
    return max(2 * in_bytes, in_bytes + 2 * out_bytes) + in_bytes + out_bytes


def check_host_memory(torch, task) -> None:
    """On the CPU, a task whose protocol peak cannot fit what this host lets its sandboxes hold
    (`sandbox_budget_bytes`) is `too_big` before anything is allocated: its inputs and the
    reference's outputs are sized on torch's meta device (no data), since a real allocation would
    end in the kernel's OOM killer, not an error. Decided from what no sandbox can change (the
    host's MemTotal), never from the moment's MemAvailable, which a sibling candidate holding
    memory in the compile pool or another lane lowers at will (red team round 15: an honest copy
    came out `too_big`, scored as incorrect). Tasks whose get_inputs or reference cannot run on
    meta are not checked here."""
    from warpk.evaluator.checks import Verdict

    need = host_peak_bytes(torch, task)
    budget = sandbox_budget_bytes()
    if need is not None and budget is not None and need > budget:
        raise Verdict("too_big", f"the task needs about {need / 2**30:.1f} GiB of host memory in this "
                      f"protocol (inputs and outputs, both workers) and this machine's sandboxes may "
                      f"hold {budget / 2**30:.1f} GiB (MemTotal less the trusted side's reserve)")


# Every sandbox's group lies below one `warpk` group (warpk.evaluator.resources), whose memory
# limit bounds their sum: each sandbox is limited, their total was not, and memory in memfds or
# tmpfs counts in no process's badness, so two sandboxes of one attacker could outgrow the host
# and the kernel's OOM killer took the trusted worker or the parent (red team round 13). Over
# this budget the kernel kills inside the sandboxes' groups only; the rest is the trusted side's.
SANDBOX_RESERVE_FRACTION, SANDBOX_RESERVE_MIN_BYTES = 0.15, 2 << 30


def sandbox_budget_bytes() -> int | None:
    """Host memory all sandboxes together may hold: MemTotal less the reserve (None: unknown)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                return total - max(SANDBOX_RESERVE_MIN_BYTES, int(total * SANDBOX_RESERVE_FRACTION))
    except (OSError, ValueError):
        return None
    return None
