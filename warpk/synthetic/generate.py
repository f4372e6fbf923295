"""Seeded synthetic KernelBench-format tasks: a chain of 1-`max_ops` ops from the vocabulary
(warpk.synthetic.ops), shapes drawn per task (a CPU-sized and a GPU-sized one) and a dtype; the
reference (`render_problem`: each op term by term) and the generator's own faster solution
(`render_solution`: fused library kernels, in place where the tensor is the model's own).

`draw(rng, ...)` gives one `Spec`; `graph_key` normalises its chain (scalar multiplies and
divides are one op, repeats of an idempotent or associative op are one), which decides
duplicates and the splits (warpk.synthetic.suite). Everything follows from the seed.

Non-goals: no torch import, no checking that a solution is right (warpk.synthetic.check).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from warpk.synthetic.ops import OPS, Op

CPU_SIZES = {"batch_size": (2, 4, 8), "seq_len": (16, 32, 64), "dim": (32, 64, 128, 256)}
GPU_SIZES = {"batch_size": (8, 16, 32), "seq_len": (128, 256, 512), "dim": (256, 512, 1024, 2048)}
BF16_SHARE = 0.15  # tasks whose inputs are bfloat16 (cast up before the first op)
# repeats of these are one op in the normalised graph (idempotent, or associative scalars)
_MERGED = {"relu", "scale", "shift", "l2_normalize", "layer_norm", "rms_norm", "clamp", "bias",
           "channel_scale"}
_SAME = {"divide": "scale"}


@dataclass(frozen=True)
class Spec:
    """One drawn task.

    Attributes:
        ops: op names in order.
        constants: each op's constant (None for ops without one).
        dtype: the inputs' dtype, float32 | bfloat16.
        dims: the last dimension before each op and after the last (constant names).
        cpu, gpu: the two shapes: batch_size, seq_len and every dimK.
    """

    ops: tuple[str, ...]
    constants: tuple[float | None, ...]
    dtype: str
    dims: tuple[str, ...]
    cpu: dict
    gpu: dict


def graph_key(ops: tuple[str, ...]) -> tuple[str, ...]:
    """The chain with divides as scales and runs of a merged op as one."""
    out: list[str] = []
    for name in ops:
        name = _SAME.get(name, name)
        if not (out and out[-1] == name and name in _MERGED):
            out.append(name)
    return tuple(out)


def _allowed(op: Op, position: int, length: int, dim: str) -> bool:
    if op.last and position != length - 1:
        return False
    if op.name == "residual":  # x + the input: only where the shape is still the input's
        return position > 0 and dim == "dim0"
    return True


def draw(rng: random.Random, vocabulary: tuple[str, ...], max_ops: int) -> Spec:
    """One task: a chain of 1..max_ops ops valid at their position, its shapes and dtype."""
    length = rng.randint(1, max_ops)
    ops, constants, dims = [], [], ["dim0"]
    for position in range(length):
        choices = [OPS[n] for n in vocabulary if _allowed(OPS[n], position, length, dims[-1])]
        op = rng.choice(choices)
        ops.append(op.name)
        constants.append(round(rng.uniform(*op.constant), 3 - 1) if op.constant else None)
        dims.append({"n": f"dim{sum(d.startswith('dim') for d in set(dims))}", "seq": "seq_len",
                     "one": "1"}.get(op.to_dim, dims[-1]))
    shapes = []
    for sizes in (CPU_SIZES, GPU_SIZES):
        shape = {"batch_size": rng.choice(sizes["batch_size"]), "seq_len": rng.choice(sizes["seq_len"])}
        shape.update({d: rng.choice(sizes["dim"]) for d in sorted(set(dims)) if d.startswith("dim")})
        shapes.append(shape)
    dtype = "bfloat16" if rng.random() < BF16_SHARE else "float32"
    return Spec(tuple(ops), tuple(constants), dtype, tuple(dims), shapes[0], shapes[1])


def _init_args(spec: Spec) -> list[str]:
    """The dimensions the parameters are shaped by: Model(...)'s arguments, in order."""
    used: list[str] = []
    for i, name in enumerate(spec.ops):
        if OPS[name].params:
            for d in (spec.dims[i], spec.dims[i + 1]):
                if d != "1" and d not in used:
                    used.append(d)
    return used


def _init_lines(spec: Spec) -> list[str]:
    lines = []
    for i, name in enumerate(spec.ops):
        for line in OPS[name].params:
            lines.append(line.format(p=f"self.p{i}", d=spec.dims[i], n=spec.dims[i + 1]))
    return lines


def _forward(spec: Spec, fused: bool) -> list[str]:
    lines = ["x = x.float()"] if spec.dtype == "bfloat16" else []
    residual = "residual" in spec.ops
    if residual:
        lines.append("x_in = x")
    owned = spec.dtype == "bfloat16" and not residual  # in place only on the model's own tensor
    for i, name in enumerate(spec.ops):
        op = OPS[name]
        c = spec.constants[i]
        form = op.naive if not fused else (op.inplace if op.inplace and owned else op.fused)
        lines += [t.format(p=f"self.p{i}", d=spec.dims[i], n=spec.dims[i + 1], c=c) for t in form]
        owned = owned or fused  # every fused form returns the model's own tensor
    return lines


def _module(spec: Spec, cls: str, fused: bool) -> list[str]:
    args = _init_args(spec)
    signature = ", ".join(["self", *args])
    body = [f"class {cls}(nn.Module):", f"    def __init__({signature}):", "        super().__init__()"]
    body += [f"        {line}" for line in _init_lines(spec)]
    body += ["", "    def forward(self, x):"]
    body += [f"        {line}" for line in _forward(spec, fused)]
    body += ["        return x"]
    return body


def describe(spec: Spec) -> str:
    return " -> ".join(spec.ops)


def render_problem(name: str, spec: Spec, split: str, seed: int) -> str:
    """The task file: module constants (GPU shape), SHAPES (CPU), SPLIT, KIND, Model, inputs."""
    consts = {k: spec.gpu[k] for k in spec.gpu}
    dtype = f", dtype=torch.{spec.dtype}" if spec.dtype != "float32" else ""
    lines = [
        f'"""Synthetic task {name}: {describe(spec)} ({spec.dtype} inputs).',
        "",
        f"Generated by warpk.synthetic (seed {seed}); the reference computes each op term by term.",
        '"""',
        "import math",
        "",
        "import torch",
        "import torch.nn as nn",
        "",
        *[f"{k} = {v}" for k, v in consts.items()],
        "",
        f"SHAPES = {{'cpu': {dict(spec.cpu)!r}}}",
        f"SPLIT = {split!r}",
        f"KIND = {'single_op' if len(spec.ops) == 1 else 'fusion'!r}",
        f"OPS = {spec.ops!r}",
        "",
        "",
        *_module(spec, "Model", fused=False),
        "",
        "",
        "def get_inputs():",
        f"    return [torch.randn(batch_size, seq_len, dim0{dtype})]",
        "",
        "",
        "def get_init_inputs():",
        f"    return [{', '.join(_init_args(spec))}]",
        "",
    ]
    return "\n".join(lines)


def render_solution(name: str, spec: Spec) -> str:
    """The generator's solution: the same parameters, fused library kernels, in place where safe."""
    lines = [
        f'"""Fused solution ({describe(spec)}): library kernels instead of term-by-term formulas,',
        'in place where the tensor is the model\'s own (generated by warpk.synthetic)."""',
        "import math",
        "",
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        "",
        *_module(spec, "ModelNew", fused=True),
        "",
    ]
    return "\n".join(lines)
