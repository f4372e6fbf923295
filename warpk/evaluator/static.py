"""Static pre-filter of a candidate's source (AST): fast, clear rejections before anything runs.

This is NOT the security boundary. A candidate can do anything Python and C++ allow inside its
own process; what decides its verdict lives in another process (warpk.evaluator.trusted), and
what it can reach of the machine is limited by the OS sandbox (warpk.evaluator.sandbox). The
rules here only turn away, cheaply and with a reason the policy can learn from, code that is
plainly not an honest kernel (the number in brackets is the exploit of shared
notes/kernelbench_anchors.md §2.2):

    - no top-level `class ModelNew`                                   -> static_reject
    - subclassing, naming or calling the reference `Model`  [4, 1]    -> static_reject
    - try/except of any kind: a fallback to PyTorch hides a broken kernel [3]
    - importing processes, threads, sockets or a foreign-function interface
      (subprocess, threading, socket, ctypes...) [10, 20]
    - exec/eval/compile/__import__: code hidden from every reader [20]
    - a CUDA extension or Triton kernel that is built but never used (a decoy) [2]

Everything else is allowed, whatever the task's reference imports included (numpy, einops,
collections.abc...), and helper methods that build layer lists: no false positives on upstream
KernelBench's own references (benchmarks/kernelbench_refcheck.py checks all 250).

Non-goals: deciding whether the code is correct or fast (the trusted worker measures that);
catching obfuscation (the sandbox and the trusted side do not depend on it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# Top-level modules whose only use in a kernel is a hack: work outside the timed calls, the
# network, or a way around Python.
DENIED_IMPORTS = frozenset(
    "subprocess socket ssl ctypes cffi multiprocessing threading _thread concurrent asyncio signal "
    "pty urllib http requests".split()
)
DENIED_CALLS = frozenset("exec eval compile __import__".split())


@dataclass(frozen=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def flag(self, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), message))

    def _check_module(self, node: ast.AST, name: str) -> None:
        root = name.split(".")[0]
        if root in DENIED_IMPORTS:
            self.flag(
                node,
                f"import of '{name}' is not allowed (processes, threads, sockets and FFI have "
                "no place in a kernel)",
            )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._check_module(node, node.module or "")
        for alias in node.names:
            if alias.name == "Model":
                self.flag(node, "importing 'Model' is not allowed: the reference may not be used")

    def visit_Try(self, node: ast.AST) -> None:
        self.flag(node, "try/except is not allowed: a fallback would hide a broken kernel")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            text = ast.unparse(base)
            if text == "Model" or text.endswith(".Model"):
                self.flag(node, f"class {node.name} subclasses the reference Model")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Model":
            self.flag(node, "the reference Model may not be used by a candidate")

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in DENIED_CALLS:
            self.flag(node, f"calling {node.func.id}() is not allowed (code hidden from readers)")
        self.generic_visit(node)


def _is_call_to(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == name)
        or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
    )


def _eager_nodes(tree: ast.Module):
    """Nodes that run at import or in ModelNew.__init__: module level, not inside other
    functions or classes."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ClassDef):
            if node.name == "ModelNew":
                stack += [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
            continue
        if isinstance(node, ast.Lambda) or (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name != "__init__"
        ):
            continue
        yield node
        stack += list(ast.iter_child_nodes(node))


def _jitted(tree: ast.Module) -> list[ast.FunctionDef]:
    return [
        f
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef)
        and any(ast.unparse(d).split("(")[0].endswith("jit") for d in f.decorator_list)
    ]


def _decoys(tree: ast.Module) -> list[Violation]:
    """A kernel that is named but never built, built but never used, or defined but never
    launched is a decoy (exploit 2). Partial: a kernel that is used on a path forward never
    takes is not caught."""
    violations = []
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    eager = list(_eager_nodes(tree))
    builds = [n for n in eager if _is_call_to(n, "load_inline")]
    bound = {
        ast.unparse(t)
        for n in eager
        if isinstance(n, ast.Assign) and _is_call_to(n.value, "load_inline")
        for t in n.targets
    }
    if "load_inline" in imported or any(_is_call_to(n, "load_inline") for n in ast.walk(tree)):
        used = {
            ast.unparse(n)
            for n in ast.walk(tree)
            if isinstance(n, ast.Name | ast.Attribute) and isinstance(n.ctx, ast.Load)
        }
        if not builds:
            violations.append(
                Violation(
                    0,
                    "load_inline is imported but no extension is built at import "
                    "or in ModelNew.__init__ (decoy kernel)",
                )
            )
        elif bound and not bound & used:
            violations.append(
                Violation(0, f"the extension {sorted(bound)[0]} is built but never used (decoy kernel)")
            )
    jitted = _jitted(tree)
    launched = {
        n.func.value.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and isinstance(n.func.value, ast.Name)
    }
    if jitted and not {f.name for f in jitted} & launched:
        violations.append(
            Violation(
                jitted[0].lineno,
                f"Triton kernel {jitted[0].name} is defined but never launched (decoy kernel)",
            )
        )
    return violations


def check_tree(tree: ast.Module) -> list[Violation]:
    """All violations in a parsed candidate; [] means it may run."""
    checker = _Checker()
    checker.visit(tree)
    checker.violations += _decoys(tree)
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        checker.violations.insert(0, Violation(0, "no top-level class ModelNew"))
    return checker.violations


def check_source(source: str) -> list[Violation]:
    """All violations in `source`; [] means it may run. Raises SyntaxError (not a violation)."""
    return check_tree(ast.parse(source))


def backend_of(tree: ast.Module) -> str:
    """What actually runs: 'cuda' (a load_inline extension, built and used), 'triton' (a launched
    @triton.jit kernel) or 'torch'; from the AST, never by running."""
    decoy = bool(_decoys(tree))
    if not decoy and any(_is_call_to(n, "load_inline") for n in _eager_nodes(tree)):
        return "cuda"
    return "triton" if _jitted(tree) and not decoy else "torch"


def candidate_backend(source: str) -> str:
    try:
        return backend_of(ast.parse(source))
    except SyntaxError:
        return "torch"
