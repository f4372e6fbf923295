"""Decontamination: a generated chain that is an upstream KernelBench problem or a bundled task,
op for op, is dropped (and counted) so that no synthetic task, trained on or held out, is one
of the benchmark's.

Both sides are reduced to op families (warpk.synthetic.ops.Op.family) with runs of one family
merged. A benchmark problem's families come from its name (KernelBench names its problems by
their ops: "63_Gemm_ReLU_Divide" is gemm, relu, scale), read piece by piece with the phrases
below; a name with a piece that is no op of our vocabulary (Conv2d, GroupNorm, ...) names a
problem outside the synthetic family, which no chain can equal. The rule is deliberately
coarse: Gemm, Matmul and Linear are one family, as are Scaling, Multiply and Divide, so a chain
is dropped whenever some benchmark problem could be it.

Upstream's names are in kernelbench_names.txt beside this module (the 250 file names of levels
1-3, listed from a checkout on 2026-12-05; names only, no file of upstream's).

Non-goals: no reading of problem files' code (names decide; the bundled suite's are ours).
"""

from __future__ import annotations

import re
from pathlib import Path

from warpk.paths import BUNDLED_ROOT
from warpk.synthetic.ops import OPS

UPSTREAM_NAMES = Path(__file__).with_name("kernelbench_names.txt")

_PHRASES = {  # pieces of a name (lower case, in order) -> family; longest match first
    ("gelu", "tanh"): "gelu", ("layer", "norm"): "layer_norm", ("rms", "norm"): "rms_norm",
    ("log", "softmax"): "log_softmax", ("l2", "normalize"): "l2_normalize", ("l2", "norm"): "l2_normalize",
    ("residual", "add"): "residual", ("bias", "add"): "bias", ("matrix", "multiplication"): "gemm",
    ("batched", "matrix", "multiplication"): "bmm", ("batched", "matmul"): "bmm",
    ("relu",): "relu", ("gelu",): "gelu", ("sigmoid",): "sigmoid", ("tanh",): "tanh", ("swish",): "silu",
    ("silu",): "silu", ("softplus",): "softplus", ("mish",): "mish", ("hardtanh",): "clamp",
    ("clamp",): "clamp", ("scaling",): "scale", ("scale",): "scale", ("multiply",): "scale",
    ("divide",): "scale", ("add",): "add",
    ("subtract",): "add", ("biasadd",): "bias", ("residualadd",): "residual", ("sum",): "sum",
    ("mean",): "mean", ("max",): "max", ("logsumexp",): "logsumexp", ("layernorm",): "layer_norm",
    ("rmsnorm",): "rms_norm", ("l2norm",): "l2_normalize", ("softmax",): "softmax",
    ("logsoftmax",): "log_softmax", ("gemm",): "gemm", ("matmul",): "gemm", ("linear",): "gemm",
    ("bmm",): "bmm", ("bias",): "bias", ("bf16",): "cast",
}
_FILLER = {"", "square", "standard", "3d", "4d", "tensor", "over", "a", "dimension", "reduction", "fused"}
_LONGEST = max(len(p) for p in _PHRASES)


def _merged(families) -> tuple[str, ...]:
    out: list[str] = []
    for family in families:
        if not out or out[-1] != family:
            out.append(family)
    return tuple(out)


def name_families(name: str) -> tuple[str, ...] | None:
    """A problem's op families from its name ('level2/63_Gemm_ReLU_Divide'), or None when a
    piece of it is no op of the synthetic vocabulary."""
    stem = name.rsplit("/", 1)[-1]
    pieces = [p.lower() for p in re.sub(r"^\d+_", "", stem).split("_")]
    families, i = [], 0
    while i < len(pieces):
        for size in range(min(_LONGEST, len(pieces) - i), 0, -1):
            family = _PHRASES.get(tuple(pieces[i:i + size]))
            if family is not None:
                families.append(family)
                i += size
                break
        else:
            if pieces[i] not in _FILLER:
                return None
            i += 1
    return _merged(families) if families else None


def chain_families(ops: tuple[str, ...]) -> tuple[str, ...]:
    return _merged(OPS[name].family for name in ops)


def benchmark_index(names: list[str] | None = None) -> dict[tuple[str, ...], str]:
    """Op families -> the first benchmark problem with them: upstream's names and the bundled
    suite's problem files (or `names`)."""
    if names is None:
        names = UPSTREAM_NAMES.read_text().split()
        names += [f"bundled/{p.stem}" for p in sorted((BUNDLED_ROOT / "problems").glob("*.py"))]
    index: dict[tuple[str, ...], str] = {}
    for name in names:
        families = name_families(name)
        if families is not None:
            index.setdefault(families, name)
    return index


def collision(ops: tuple[str, ...], index: dict[tuple[str, ...], str]) -> str | None:
    """The benchmark problem a chain is, or None."""
    return index.get(chain_families(ops))
