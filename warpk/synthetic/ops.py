"""The synthetic tasks' op vocabulary: each op written two ways, as source lines.

`naive` is how the reference computes it: term by term, one memory pass per operator, as model
code often does (a GELU from its tanh formula, a softmax from exp and sum). `fused` is the
generator's own faster solution: the library's fused kernel, and an in-place form (`inplace`)
where the tensor flowing through is the model's own (never the caller's input). Templates
format with: {p} the op's parameter prefix (self.p3), {d} the flowing tensor's last dimension
(a constant's name), {c} the op's constant, {n} the dimension a matmul maps to.

Every tensor flows as (batch, seq, d); `family` names what the op is in KernelBench's names
(warpk.synthetic.contamination), ops that change d say so (`to_dim`), reductions and the cast
to bfloat16 end a chain (`last`).

Non-goals: no torch import (ops are text); no checking (warpk.synthetic.generate filters).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    name: str
    family: str
    naive: tuple[str, ...]
    fused: tuple[str, ...]
    inplace: tuple[str, ...] = ()  # the fused form when the flowing tensor is the model's own
    params: tuple[str, ...] = ()  # __init__ lines; {p}, {d}, {n}
    constant: tuple[float, float] | None = None  # drawn uniformly, 3 significant digits
    to_dim: str = ""  # "n": maps d to a fresh dimension; "seq": to seq_len; "one": reduces it
    last: bool = False  # ends a chain (reductions, the cast to bfloat16)


def _lines(v) -> tuple[str, ...]:
    return (v,) if isinstance(v, str) else tuple(v)


def _op(name, family, naive, fused, inplace=(), **kw) -> Op:
    return Op(name, family, _lines(naive), _lines(fused), _lines(inplace), **kw)


_GELU = "x = 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3))))"
_SIGMOID = "x = 1.0 / (1.0 + torch.exp(-x))"
_SOFTPLUS = "torch.log1p(torch.exp(-torch.abs(x))) + torch.maximum(x, torch.zeros_like(x))"

OPS: dict[str, Op] = {op.name: op for op in [
    # elementwise activations
    _op("relu", "relu", "x = torch.maximum(x, torch.zeros_like(x))", "x = torch.relu(x)", "x = x.relu_()"),
    _op("gelu", "gelu", _GELU, 'x = F.gelu(x, approximate="tanh")'),
    _op("sigmoid", "sigmoid", _SIGMOID, "x = torch.sigmoid(x)", "x = x.sigmoid_()"),
    _op("tanh", "tanh", "x = 2.0 / (1.0 + torch.exp(-2.0 * x)) - 1.0", "x = torch.tanh(x)", "x = x.tanh_()"),
    _op("silu", "silu", "x = x * (1.0 / (1.0 + torch.exp(-x)))", "x = F.silu(x)",
        "x = F.silu(x, inplace=True)"),
    _op("softplus", "softplus", f"x = {_SOFTPLUS}", "x = F.softplus(x)"),
    _op("mish", "mish", f"x = x * torch.tanh({_SOFTPLUS})", "x = F.mish(x)", "x = F.mish(x, inplace=True)"),
    _op("clamp", "clamp", ("lo = torch.full_like(x, -{c})", "x = torch.minimum(torch.maximum(x, lo), -lo)"),
        "x = torch.clamp(x, -{c}, {c})", "x = x.clamp_(-{c}, {c})", constant=(0.5, 3.0)),
    # scalars and broadcasting
    _op("scale", "scale", "x = x * {c}", "x = x * {c}", "x = x.mul_({c})", constant=(0.25, 4.0)),
    _op("divide", "scale", "x = x / {c}", "x = x * (1.0 / {c})", "x = x.mul_(1.0 / {c})",
        constant=(1.5, 8.0)),
    _op("shift", "add", "x = x + {c}", "x = x + {c}", "x = x.add_({c})", constant=(-2.0, 2.0)),
    _op("bias", "bias", "x = x + {p}_bias", "x = x + {p}_bias", "x = x.add_({p}_bias)",
        params=("{p}_bias = nn.Parameter(torch.randn({d}) * 0.1)",)),
    _op("channel_scale", "scale", "x = x * {p}_scale", "x = x * {p}_scale", "x = x.mul_({p}_scale)",
        params=("{p}_scale = nn.Parameter(1.0 + torch.randn({d}) * 0.1)",)),
    _op("residual", "residual", "x = x + x_in", "x = x + x_in", "x = x.add_(x_in)"),
    # row-wise: norms and softmax over the last dimension
    _op("layer_norm", "layer_norm",
        ("mu = x.sum(-1, keepdim=True) / x.shape[-1]", "xc = x - mu",
         "x = xc / torch.sqrt((xc * xc).sum(-1, keepdim=True) / x.shape[-1] + 1e-5)"),
        "x = F.layer_norm(x, (x.shape[-1],), eps=1e-5)"),
    _op("rms_norm", "rms_norm", "x = x / torch.sqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + 1e-6)",
        "x = F.rms_norm(x, (x.shape[-1],), eps=1e-6)"),
    _op("l2_normalize", "l2_normalize", "x = x / torch.sqrt((x * x).sum(-1, keepdim=True)).clamp_min(1e-12)",
        "x = F.normalize(x, dim=-1)"),
    _op("softmax", "softmax",
        ("e = torch.exp(x - x.max(dim=-1, keepdim=True).values)", "x = e / e.sum(-1, keepdim=True)"),
        "x = torch.softmax(x, dim=-1)"),
    _op("log_softmax", "log_softmax",
        ("s = x - x.max(dim=-1, keepdim=True).values",
         "x = s - torch.log(torch.exp(s).sum(-1, keepdim=True))"),
        "x = torch.log_softmax(x, dim=-1)"),
    # matmuls
    _op("linear", "gemm", "x = torch.matmul(x, {p}_weight) + {p}_bias",
        "x = torch.addmm({p}_bias, x.reshape(-1, x.shape[-1]), {p}_weight).view(*x.shape[:-1], -1)",
        params=("{p}_weight = nn.Parameter(torch.randn({d}, {n}) / math.sqrt({d}))",
                "{p}_bias = nn.Parameter(torch.randn({n}) * 0.1)"), to_dim="n"),
    _op("scores", "bmm", "x = torch.bmm(x, x.transpose(1, 2)) * (1.0 / math.sqrt(x.shape[-1]))",
        ("x = torch.baddbmm(x.new_empty(x.shape[0], x.shape[1], x.shape[1]), x, x.transpose(1, 2),",
         "                  beta=0.0, alpha=1.0 / math.sqrt(x.shape[-1]))"), to_dim="seq"),
    # reductions over the last dimension (end a chain)
    _op("sum", "sum", "x = x.sum(-1, keepdim=True)", "x = x.sum(-1, keepdim=True)", to_dim="one", last=True),
    _op("mean", "mean", "x = x.sum(-1, keepdim=True) / x.shape[-1]", "x = x.mean(-1, keepdim=True)",
        to_dim="one", last=True),
    _op("max", "max", "x = x.max(dim=-1, keepdim=True).values", "x = x.amax(-1, keepdim=True)",
        to_dim="one", last=True),
    _op("logsumexp", "logsumexp",
        ("m = x.max(dim=-1, keepdim=True).values",
         "x = m + torch.log(torch.exp(x - m).sum(-1, keepdim=True))"),
        "x = torch.logsumexp(x, dim=-1, keepdim=True)", to_dim="one", last=True),
    # dtype: the output cast to bfloat16 (a task's bfloat16 inputs are cast up before its first op)
    _op("to_bf16", "cast", "x = x.to(torch.bfloat16)", "x = x.to(torch.bfloat16)", last=True),
]}

# the vocabulary's groups (for conf/tasks/synthetic.yaml's `vocabulary`)
GROUPS = {
    "activations": ("relu", "gelu", "sigmoid", "tanh", "silu", "softplus", "mish", "clamp"),
    "broadcast": ("scale", "divide", "shift", "bias", "channel_scale", "residual"),
    "norms": ("layer_norm", "rms_norm", "l2_normalize", "softmax", "log_softmax"),
    "matmul": ("linear", "scores"),
    "reductions": ("sum", "mean", "max", "logsumexp"),
    "casts": ("to_bf16",),
}
assert sorted(n for g in GROUPS.values() for n in g) == sorted(OPS)
