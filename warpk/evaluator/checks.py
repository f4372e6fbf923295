"""Output verification, run by the trusted worker only (never in the candidate's process).

Every function takes the `torch` module as its first argument so this module imports nothing
heavy. The candidate's tensors reach here rebuilt from raw bytes (warpk.evaluator.transport),
so they are plain tensors whose dtype and shape are what the bytes say.

Non-goals: no drawing of inputs (session.Session.inputs), no timing.
"""

from __future__ import annotations

CHUNK_ELEMENTS = 1 << 24  # compare in chunks of this size: bounded extra memory
# atol = rtol for float64 outputs. Computing a float64 task in float32 rounds every value by up
# to 6e-8 relative (more after a reduction), far above this; float64 done in another order
# stays near 1e-13. So a float64 task computed in float32 is `incorrect` (docs/evaluator.md).
TOLERANCE_FP64 = 1e-9


class Verdict(Exception):
    """Stops an evaluation with a non-ok status and a one-line reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def flatten(out) -> list:
    return list(out) if isinstance(out, list | tuple) else [out]


def same_inputs(torch, inputs: list, pristine: list) -> bool:
    """True if no input tensor changed: bitwise (a NaN rewritten with another NaN, or 0.0 with
    -0.0, is a change), one pass over the bytes."""
    if len(inputs) != len(pristine):
        return False
    for x, y in zip(inputs, pristine, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if not _same_bits(torch, x, y):
            return False
    return True


def _same_bits(torch, x, y) -> bool:
    """Bitwise equal, compared as the widest integers that tile both tensors' bytes (memcmp
    speed; as uint8 it is several times slower)."""
    a, b = (t.detach().contiguous().reshape(-1).view(torch.uint8) for t in (x, y))
    for dtype, size in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if a.numel() % size == 0 and a.storage_offset() % size == 0 and b.storage_offset() % size == 0:
            return torch.equal(a.view(dtype), b.view(dtype))
    return torch.equal(a, b)


def _compare(torch, r, n, tol: float) -> tuple[float, float, str | None]:
    """(max abs error, max |ref|, why they differ or None), chunk by chunk.

    Floats are compared in float32 (float64 for float64): the verdict can differ from a float64
    comparison only within ~1e-7 relative of the bound atol + rtol*|ref| (tolerances are 1e-4 and
    up). The common case, every element close, costs one comparison and three reductions per
    chunk; only a failing chunk is examined for its reason. Integers and booleans must be equal,
    compared as they are (float would round large ints)."""
    # a lazy conjugate (or negative) view, e.g. the reference's own output run here, resolved:
    # view_as_real refuses it (a harness failure on an honest task before, CPU, 2026-12-07)
    r = r.detach().resolve_conj().resolve_neg().reshape(-1)
    n = n.detach().resolve_conj().resolve_neg().reshape(-1)
    if r.is_complex():  # compare real and imaginary parts
        r, n = torch.view_as_real(r).reshape(-1), torch.view_as_real(n).reshape(-1)
    if not r.is_floating_point():
        scale = 0.0
        for start in range(0, r.numel(), CHUNK_ELEMENTS):
            r_c, n_c = r[start : start + CHUNK_ELEMENTS], n[start : start + CHUNK_ELEMENTS]
            if not torch.equal(r_c, n_c):
                worst = float((n_c.double() - r_c.double()).abs().max())
                return worst, scale, f"differs: max abs err {worst:.3g} > tolerance 0 (integer outputs)"
            scale = max(scale, float(r_c.double().abs().max()))
        return 0.0, scale, None
    work = torch.float64 if r.dtype == torch.float64 else torch.float32
    worst, scale = 0.0, 0.0
    for start in range(0, r.numel(), CHUNK_ELEMENTS):
        r_w = r[start : start + CHUNK_ELEMENTS].to(work)
        n_w = n[start : start + CHUNK_ELEMENTS].to(work)
        diff, r_abs = (n_w - r_w).abs_(), r_w.abs()
        chunk_worst, chunk_scale = float(diff.max()), float(r_abs.max())
        # |n - r| < tol + tol * |r| everywhere, as max(|n - r| - tol * |r|) < tol, in place (two
        # temporaries per chunk, not five). Strictly below: NaN anywhere, or an infinite
        # reference (inf - inf), goes to isclose.
        if not float(diff.sub_(r_abs, alpha=tol).max()) < tol:
            if not bool(torch.isclose(n_w, r_w, atol=tol, rtol=tol, equal_nan=True).all()):
                return _why(torch, r_w.double(), n_w.double(), tol, worst, scale)
            # close after all: NaN where the reference is NaN, or the same infinity (no error)
            diff = (n_w - r_w).abs_().nan_to_num_(0.0)
            chunk_worst = float(diff.max())
            chunk_scale = float(r_abs.nan_to_num_(0.0, posinf=0.0).max())
        worst, scale = max(worst, chunk_worst), max(scale, chunk_scale)
    return worst, scale, None


def _why(torch, r64, n64, tol: float, worst: float, scale: float) -> tuple[float, float, str]:
    """The reason a chunk that is not all close fails (its errors folded into worst/scale)."""
    if not torch.equal(torch.isnan(n64), torch.isnan(r64)):
        return worst, scale, "contains NaN where the reference does not (unwritten or invalid values)"
    if not torch.equal(torch.isinf(n64), torch.isinf(r64)):
        return worst, scale, "has inf where the reference does not"
    finite = torch.isfinite(r64)
    worst = max(worst, float((n64 - r64).abs().masked_fill(~finite, 0.0).max()))
    scale = max(scale, float(r64.masked_fill(~finite, 0.0).abs().max()))
    return worst, scale, f"differs: max abs err {worst:.3g} > tolerance {tol:g}"


def check_correct(torch, ref_out, new_out, protocol, where: str) -> tuple[float, float]:
    """(max abs error, max abs error / max |ref|); raises Verdict('incorrect') on any mismatch.

    `protocol` has tolerance_fp32 and tolerance_low_precision (atol = rtol). NaN passes only
    where the reference itself is NaN.
    """
    refs, news = flatten(ref_out), flatten(new_out)
    if len(refs) != len(news):
        raise Verdict("incorrect", f"{where}: returned {len(news)} outputs, reference returns {len(refs)}")
    worst_abs = worst_rel = 0.0
    for i, (r, n) in enumerate(zip(refs, news, strict=True)):
        if not isinstance(r, torch.Tensor):
            raise Verdict("runtime_error", f"evaluation failed: the reference's output {i} is not a tensor")
        if n.shape != r.shape:
            raise Verdict(
                "incorrect", f"{where}: output {i} shape {tuple(n.shape)} != reference {tuple(r.shape)}"
            )
        if n.dtype != r.dtype:
            raise Verdict("incorrect", f"{where}: output {i} dtype {n.dtype} != reference {r.dtype}")
        low = r.dtype in (torch.float16, torch.bfloat16)
        tol = protocol.tolerance_low_precision if low else protocol.tolerance_fp32
        if r.dtype in (torch.float64, torch.complex128):
            tol = min(tol, TOLERANCE_FP64)
        abs_err, scale, why = _compare(torch, r, n.to(r.device), tol)
        if why:
            raise Verdict("incorrect", f"{where}: output {i} {why}")
        worst_abs = max(worst_abs, abs_err)
        worst_rel = max(worst_rel, abs_err / max(scale, 1e-12))
    return worst_abs, worst_rel


def fingerprint(torch, inputs: list) -> list[str]:
    """Cheap sums of a call's inputs, to check that drawing them again gives the same ones."""
    def one(x) -> str:
        if not isinstance(x, torch.Tensor):
            return repr(x)
        x = x.resolve_conj().resolve_neg()
        values = torch.view_as_real(x) if x.is_complex() else x
        return f"{tuple(x.shape)} {x.dtype} {float(values.sum(dtype=torch.float64))!r}"

    return [one(x) for x in inputs]


def check_redrawn(torch, calls: list[list], prints: list) -> None:
    """A huge task's reference runs on its inputs drawn again from the seed: they must match."""
    if [fingerprint(torch, c) for c in calls] != prints:
        raise RuntimeError("the task's get_inputs() is not a function of torch.manual_seed alone "
                           "(drawn again, its inputs differ), which a task over 1 GiB of inputs and "
                           "outputs needs")
