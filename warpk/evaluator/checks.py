"""Correctness checks used by the worker: output comparison, input cloning, memory poisoning.

Every function takes the `torch` module as its first argument so this module imports nothing
heavy; it runs only inside worker processes.
"""

from __future__ import annotations


class Verdict(Exception):
    """Stops an evaluation with a non-ok status and a one-line reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def flatten(out) -> list:
    return list(out) if isinstance(out, list | tuple) else [out]


def clone_inputs(torch, inputs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def same_inputs(torch, inputs: list, pristine: list) -> bool:
    """True if no input tensor changed (bitwise; NaN positions must match too)."""
    for x, y in zip(inputs, pristine, strict=True):
        if isinstance(x, torch.Tensor) and not torch.equal(x.nan_to_num(0.125), y.nan_to_num(0.125)):
            return False
    return True


def shares_storage(torch, first, second) -> bool:
    """True if an output of `second` lives in the same memory as an output of `first`."""
    ptrs = {
        o.untyped_storage().data_ptr() for o in flatten(first) if isinstance(o, torch.Tensor) and o.numel()
    }
    return any(
        o.untyped_storage().data_ptr() in ptrs
        for o in flatten(second)
        if isinstance(o, torch.Tensor) and o.numel()
    )


def poison_like(torch, outputs) -> None:
    """Fill then free blocks the size of `outputs` with NaN bytes (0xFF), so memory the caching
    allocator (or malloc) hands to the candidate next holds NaN: an output it allocates but never
    writes (e.g. torch.empty over the reference's freed buffer) cannot match by accident."""
    if outputs is None:
        return
    blocks = [
        torch.empty(o.numel() * o.element_size(), dtype=torch.uint8, device=o.device).fill_(255)
        for o in flatten(outputs)
        if isinstance(o, torch.Tensor)
    ]
    del blocks


def check_correct(torch, ref_out, new_out, protocol: dict, where: str) -> tuple[float, float]:
    """(max abs error, max abs error / max |ref|); raises Verdict('incorrect') on any mismatch."""
    refs, news = flatten(ref_out), flatten(new_out)
    if len(refs) != len(news):
        raise Verdict("incorrect", f"{where}: returned {len(news)} outputs, reference returns {len(refs)}")
    worst_abs = worst_rel = 0.0
    for i, (r, n) in enumerate(zip(refs, news, strict=True)):
        if type(n) not in (torch.Tensor, torch.nn.Parameter):
            raise Verdict("incorrect", f"{where}: output {i} is a {type(n).__name__}, not a plain tensor")
        if n.device != r.device:
            raise Verdict("incorrect", f"{where}: output {i} is on {n.device}, reference on {r.device}")
        if n.shape != r.shape:
            raise Verdict(
                "incorrect", f"{where}: output {i} shape {tuple(n.shape)} != reference {tuple(r.shape)}"
            )
        if n.dtype != r.dtype:
            raise Verdict("incorrect", f"{where}: output {i} dtype {n.dtype} != reference {r.dtype}")
        if n.numel() and n.untyped_storage().data_ptr() == 0:
            raise Verdict("incorrect", f"{where}: output {i} has no storage")
        low = r.dtype in (torch.float16, torch.bfloat16)
        tol = protocol["tolerance_low_precision"] if low else protocol["tolerance_fp32"]
        r64, n64 = r.detach().double(), n.detach().double()
        if torch.isnan(n64).any():
            raise Verdict("incorrect", f"{where}: output {i} contains NaN (unwritten or invalid values)")
        if not torch.equal(torch.isinf(n64), torch.isinf(r64)):
            raise Verdict("incorrect", f"{where}: output {i} has inf where the reference does not")
        diff = (n64 - r64).abs()
        abs_err = float(diff.max()) if diff.numel() else 0.0
        rel_err = abs_err / max(float(r64.abs().max()) if r64.numel() else 0.0, 1e-12)
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        if not torch.allclose(n64, r64, atol=tol, rtol=tol):
            raise Verdict(
                "incorrect", f"{where}: output {i} differs: max abs err {abs_err:.3g} > tolerance {tol:g}"
            )
    return worst_abs, worst_rel
