"""Static checks: each rule rejects its exploit and leaves honest candidates alone."""

import pytest

from warpk.evaluator.static import candidate_backend, check_source
from warpk.tasks import BUNDLED_ROOT

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _all(body: str) -> str:
    return " | ".join(str(v) for v in check_source(HEAD + body))


@pytest.mark.parametrize(
    "path", sorted((BUNDLED_ROOT / "solutions").rglob("*.py")), ids=lambda p: p.parent.name + "/" + p.name
)
def test_every_bundled_solution_passes(path):
    assert check_source(path.read_text()) == []


@pytest.mark.parametrize(
    "body,expected",
    [
        ("class Other(nn.Module): pass\n", "no top-level class ModelNew"),
        ("class ModelNew(Model): pass\n", "subclasses the reference Model"),
        ("class ModelNew(nn.Module):\n  def forward(self, x):\n    return Model()(x)\n", "reference Model"),
        (
            "class ModelNew(nn.Module):\n  def forward(self, x):\n    try:\n      return f(x)\n"
            "    except Exception:\n      return torch.softmax(x, -1)\n",
            "try/except is not allowed",
        ),
        ("import threading\nclass ModelNew(nn.Module): pass\n", "import of 'threading' is not allowed"),
        ("import os\nclass ModelNew(nn.Module): pass\n", "import of 'os' is not allowed"),
        ("from time import perf_counter\nclass ModelNew(nn.Module): pass\n", "import of 'time'"),
        ("import ctypes\nclass ModelNew(nn.Module): pass\n", "import of 'ctypes'"),
        (
            "torch.cuda.synchronize = lambda: None\nclass ModelNew(nn.Module): pass\n",
            "patches an imported module",
        ),
        ("F.softmax = torch.exp\nclass ModelNew(nn.Module): pass\n", "patches an imported module"),
        ("s = torch.cuda.Stream()\nclass ModelNew(nn.Module): pass\n", "'.Stream' is not allowed"),
        ("e = torch.cuda.Event()\nclass ModelNew(nn.Module): pass\n", "'.Event' is not allowed"),
        (
            "x = torch.utils.cpp_extension.os.environ\nclass ModelNew(nn.Module): pass\n",
            "'.os' is not allowed",
        ),
        ("open('/tmp/x', 'w')\nclass ModelNew(nn.Module): pass\n", "calling open() is not allowed"),
        ("exec('import os')\nclass ModelNew(nn.Module): pass\n", "calling exec() is not allowed"),
        ("m = __import__('os')\nclass ModelNew(nn.Module): pass\n", "'__import__' is not allowed"),
        (
            "k = ().__class__.__bases__[0].__subclasses__()\nclass ModelNew(nn.Module): pass\n",
            "'.__class__' is not allowed",
        ),
        (
            "class Lazy(torch.Tensor): pass\nclass ModelNew(nn.Module): pass\n",
            "tensor subclasses are not allowed",
        ),
        (
            "class ModelNew(nn.Module):\n  @classmethod\n  def __torch_function__(cls, *a): pass\n",
            "__torch_function__ is not allowed",
        ),
        ("torch.save({}, 'x.pt')\nclass ModelNew(nn.Module): pass\n", "'torch.save' is not allowed"),
        (
            "SRC = 'cudaStream_t s; cudaStreamCreate(&s);'\nclass ModelNew(nn.Module): pass\n",
            "cudaStreamCreate",
        ),
        ('SRC = \'FILE* f = fopen("/etc/passwd", "r");\'\nclass ModelNew(nn.Module): pass\n', "fopen"),
        ("CACHE = {}\ndef f():\n  global CACHE\nclass ModelNew(nn.Module): pass\n", "global statements"),
    ],
)
def test_rule_rejects_its_exploit(body, expected):
    assert expected in _all(body)


def test_violation_names_the_line():
    assert _all("x = 1\nimport socket\nclass ModelNew(nn.Module): pass\n").startswith(
        "line 5: import of 'socket'"
    )


CUDA = (
    HEAD
    + """from torch.utils.cpp_extension import load_inline
_ext = load_inline(name="k", cpp_sources="", cuda_sources="", functions=["f"])
class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.f(x)
"""
)
TRITON = (
    HEAD
    + """import triton
import triton.language as tl
@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    pass
class ModelNew(nn.Module):
    def forward(self, x):
        _k[(1,)](x, x.numel(), BLOCK=128)
        return x
"""
)


def test_backend_detection():
    assert candidate_backend(CUDA) == "cuda" and check_source(CUDA) == []
    assert candidate_backend(TRITON) == "triton" and check_source(TRITON) == []
    assert candidate_backend(HEAD + "class ModelNew(nn.Module): pass\n") == "torch"


@pytest.mark.parametrize(
    "source,expected",
    [
        (
            CUDA.replace("_ext = load_inline(", "def _never():\n    return load_inline("),
            "no extension is built",
        ),
        (CUDA.replace("return _ext.f(x)", "return torch.softmax(x, -1)"), "built but never used"),
        (TRITON.replace("_k[(1,)](x, x.numel(), BLOCK=128)", "pass"), "never launched"),
    ],
)
def test_decoy_kernels_are_rejected(source, expected):
    assert expected in " | ".join(str(v) for v in check_source(source))
    assert candidate_backend(source) == "torch"  # what actually runs
