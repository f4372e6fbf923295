"""The static pre-filter: each rule rejects its hack and leaves honest and upstream code alone
(the security boundary is the trusted/untrusted split and the sandbox, tests/unit/test_sandbox.py)."""

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
        ("from task import Model\nclass ModelNew(nn.Module): pass\n", "importing 'Model'"),
        (
            "class ModelNew(nn.Module):\n  def forward(self, x):\n    try:\n      return f(x)\n"
            "    except Exception:\n      return torch.softmax(x, -1)\n",
            "try/except is not allowed",
        ),
        ("import threading\nclass ModelNew(nn.Module): pass\n", "import of 'threading' is not allowed"),
        ("import subprocess\nclass ModelNew(nn.Module): pass\n", "import of 'subprocess'"),
        ("from socket import socket\nclass ModelNew(nn.Module): pass\n", "import of 'socket'"),
        ("import ctypes\nclass ModelNew(nn.Module): pass\n", "import of 'ctypes'"),
        ("import concurrent.futures\nclass ModelNew(nn.Module): pass\n", "import of 'concurrent.futures'"),
        ("exec('import os')\nclass ModelNew(nn.Module): pass\n", "calling exec() is not allowed"),
        ("m = __import__('os')\nclass ModelNew(nn.Module): pass\n", "calling __import__() is not allowed"),
    ],
)
def test_rule_rejects_its_hack(body, expected):
    assert expected in _all(body)


@pytest.mark.parametrize(
    "body",
    [
        "import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n",  # what LLM candidates often write
        "import numpy as np\nfrom einops import rearrange\nimport collections.abc\n",  # upstream imports
        "import math\nfrom itertools import repeat\n",
        "class ModelNew(nn.Module):\n  def _make_layer(self, n):\n    layers = []\n"
        "    for _ in range(n):\n      layers.append(nn.ReLU())\n    return nn.Sequential(*layers)\n",
    ],
)
def test_no_false_positives_on_what_honest_and_upstream_code_does(body):
    source = body if "class ModelNew" in body else body + "class ModelNew(nn.Module): pass\n"
    assert check_source(HEAD + source) == []


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


def test_model_new_may_be_bound_by_assignment():
    assert check_source(HEAD + "class Fast(nn.Module): pass\nModelNew = Fast\n") == []
    assert "reference Model" in _all("ModelNew = Model\n")
    assert "no top-level class ModelNew" in _all("def f():\n  ModelNew = nn.Identity\n")


@pytest.mark.parametrize(
    "source,backend",
    [
        # the two false positives of the old call-syntax decoy rule: both honest, both rejected
        (
            CUDA.replace("_ext = load_inline(", "def _build():\n    return load_inline(")
            + "_ext = _build()\n",
            "cuda",
        ),
        (TRITON.replace("_k[(1,)]", "KERNELS = {'k': _k}\n        KERNELS['k'][(1,)]"), "triton"),
        (
            "import torch.utils.cpp_extension as ce\nm = ce.load(name='m', sources=['m.cu'])\n"
            "class ModelNew(nn.Module): pass\n",
            "cuda",
        ),
        ("from triton import jit\n@jit\ndef k(x): pass\nclass ModelNew(nn.Module): pass\n", "triton"),
        ("@torch.jit.script\ndef f(x):\n  return x\nclass ModelNew(nn.Module): pass\n", "torch"),
        ("def load(path):\n  return torch.load(path)\nclass ModelNew(nn.Module): pass\n", "torch"),
    ],
)
def test_backend_is_what_the_source_builds_wherever_it_is_built(source, backend):
    source = source if source.startswith(HEAD) else HEAD + source
    assert check_source(source) == [] and candidate_backend(source) == backend


@pytest.mark.parametrize(
    "source,backend",
    [
        (CUDA.replace("_ext = load_inline(", "def _never():\n    return load_inline("), "cuda"),
        (CUDA.replace("return _ext.f(x)", "return torch.softmax(x, -1)"), "cuda"),
        (TRITON.replace("_k[(1,)](x, x.numel(), BLOCK=128)", "pass"), "triton"),
        (
            HEAD + "from torch.utils.cpp_extension import load_inline\nclass ModelNew(nn.Module): pass\n",
            "torch",
        ),  # imported, never named: nothing is built
    ],
)
def test_decoy_kernels_are_left_to_correctness_and_timing(source, backend):
    """Built or defined but unused: an honest torch candidate with a wasted compile, judged by the
    trusted side's output check and clock like any other (exploit 2); not a static rule, since
    telling it from a kernel launched through a table or a helper needs execution."""
    assert check_source(source) == []
    assert candidate_backend(source) == backend  # what it can build; evidence, not proof of use
