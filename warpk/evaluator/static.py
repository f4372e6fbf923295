"""Static pre-filter of a candidate's source (AST): fast, clear rejections before anything runs.

This is NOT the security boundary. A candidate can do anything Python and C++ allow inside its
own process; what decides its verdict lives in another process (warpk.evaluator.trusted), and
what it can reach of the machine is limited by the OS sandbox (warpk.evaluator.sandbox). The
rules here only turn away, cheaply and with a reason the policy can learn from, code that is
plainly not an honest kernel (the number in brackets is the exploit of shared
notes/kernelbench_anchors.md §2.2):

    - no top-level `class ModelNew` (or `ModelNew = SomeClass`)      -> static_reject
    - subclassing, naming or calling the reference `Model`  [4, 1]    -> static_reject
    - try/except of any kind: a fallback to PyTorch hides a broken kernel [3]
    - importing processes, threads, sockets or a foreign-function interface
      (subprocess, threading, socket, ctypes...) [10, 20]
    - exec/eval/compile/__import__: code hidden from every reader [20]

Each rule reads what the code says, never how a kernel is reached, and none rejects an honest
idiom we know of: tests/unit/test_static_honest.py passes every file of tests/data/honest/
(extensions built by helpers, at import, in `__init__` or on first use; kernels launched through
tables, partials, methods, closures, getattr; host C++ extensions; torch-only candidates) and
every upstream KernelBench reference renamed `ModelNew`. A rule that hits a new honest idiom is
narrowed, with that idiom added to the set.

A decoy kernel [2] (built or defined but not used, the work done by torch) is not a rule here:
whether a kernel runs is a question about execution, and the call-syntax test this module had
rejected honest candidates (an extension built by a helper, a Triton kernel launched through a
dispatch table). The trusted side verifies every output and times the candidate by its own
clock, so a decoy is an honest torch candidate with a wasted compile and is judged as one.

`backend_of` says what the source can build (a cpp_extension, a Triton kernel, neither), which
decides where and how the candidate is scheduled; it is evidence of a kernel, not proof that the
kernel runs.

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

CPP_EXTENSION = "torch.utils.cpp_extension"
EXTENSION_BUILDERS = frozenset({"load_inline", "load"})  # of torch.utils.cpp_extension


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


def _defines_model_new(tree: ast.Module) -> bool:
    """A top-level `class ModelNew` or `ModelNew = ...` (the loader then checks it is a class)."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bound = [node.name]
        elif isinstance(node, ast.Assign):
            bound = [ast.unparse(t) for t in node.targets]
        elif isinstance(node, ast.AnnAssign):
            bound = [ast.unparse(node.target)]
        else:
            continue
        if "ModelNew" in bound:
            return True
    return False


def check_tree(tree: ast.Module) -> list[Violation]:
    """All violations in a parsed candidate; [] means it may run."""
    checker = _Checker()
    checker.visit(tree)
    if not _defines_model_new(tree):
        checker.violations.insert(0, Violation(0, "no top-level class ModelNew"))
    return checker.violations


def check_source(source: str) -> list[Violation]:
    """All violations in `source`; [] means it may run. Raises SyntaxError (not a violation)."""
    return check_tree(ast.parse(source))


def _names_for(tree: ast.Module, module: str, names: frozenset[str]) -> tuple[set[str], set[str]]:
    """(the names `module` goes by, the local names of its members `names`) under this tree's
    imports: `import a.b as m` and `from a import b` name the module; `from a.b import n as f`
    and `from a.b import *` name members. Its full dotted path always names it."""
    parent, _, leaf = module.rpartition(".")
    modules, members = {module}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.asname and a.name == module}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if node.module == parent and a.name == leaf:
                    modules.add(a.asname or a.name)
                elif (node.module == module or node.module.startswith(module + ".")) and (
                    a.name == "*" or a.name in names
                ):
                    members |= set(names) if a.name == "*" else {a.asname or a.name}
    return modules, members


def _refers_to(tree: ast.Module, module: str, names: frozenset[str], distinctive: frozenset[str]) -> bool:
    """True when code (not an import) names one of `module`'s `names`: as an imported name, as
    `<module>.<name>` under any name of the module, or, for the `distinctive` ones, as
    `<anything>.<name>`."""
    modules, members = _names_for(tree, module, names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in members and isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Attribute) and node.attr in names:
            if node.attr in distinctive or ast.unparse(node.value) in modules:
                return True
    return False


def builds_extension(tree: ast.Module) -> bool:
    """The source refers to torch.utils.cpp_extension's load_inline or load (a C++/CUDA
    extension), wherever that is: at import, in a helper, in __init__, in forward."""
    return _refers_to(tree, CPP_EXTENSION, EXTENSION_BUILDERS, frozenset({"load_inline"}))


def defines_triton_kernel(tree: ast.Module) -> bool:
    """The source uses triton.jit (as a decorator or a call), under whatever import name."""
    return _refers_to(tree, "triton", frozenset({"jit"}), frozenset())


def backend_of(tree: ast.Module) -> str:
    """What the candidate can build, from the AST, never by running: 'cuda' (a
    torch.utils.cpp_extension build, host-only C++ included: it needs the compiler and gets a
    build cache), 'triton' (a @triton.jit kernel: its first call compiles) or 'torch'. Evidence
    of a kernel, not proof that it runs: a kernel built but unused is judged by correctness and
    timing like any torch candidate."""
    if builds_extension(tree):
        return "cuda"
    return "triton" if defines_triton_kernel(tree) else "torch"


def candidate_backend(source: str) -> str:
    try:
        return backend_of(ast.parse(source))
    except SyntaxError:
        return "torch"
