"""Static checks of a candidate's source, before anything of it runs (AST, not regex).

A candidate is a Python module defining `ModelNew`. It may import only torch, triton and a few
pure standard-library modules, and it may not touch the machinery around it. Each rule below
closes a known evaluation exploit (shared notes/kernelbench_anchors.md §2; the number in
brackets): anything else that passes here is left to the runtime checks of the worker.

    - no top-level `class ModelNew`                                   -> static_reject
    - subclassing, naming or calling the reference `Model`  [4, 1]    -> static_reject
    - try/except of any kind: a fallback to PyTorch hides a broken kernel [3]
    - imports outside the allowlist: threads, processes, os, sys, time, ctypes, sockets,
      files... [10, 12, 20]
    - CUDA streams and events, from Python or in CUDA source strings [9]
    - assigning to or deleting attributes of imported modules: monkeypatching torch, triton,
      timers [12]
    - exec/eval/compile/open/__import__/setattr/getattr/globals..., and dunder attributes
      other than __init__: sandbox escapes and hidden imports [20]
    - tensor subclasses and __torch_function__/__torch_dispatch__: lazy outputs [11]
    - file, environment, process or thread calls inside CUDA/C++ source strings [10, 20]

Non-goals: deciding whether the code is *correct* or *fast* (the worker measures that);
catching every possible obfuscation (the worker's sandbox is the second line).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

ALLOWED_IMPORTS = frozenset(
    "torch triton math typing functools numbers itertools collections dataclasses __future__".split()
)
BANNED_CALLS = frozenset(
    "exec eval compile open __import__ setattr getattr delattr globals locals vars input breakpoint "
    "exit quit memoryview".split()
)
# Attribute and member names that reach the machine, the clock, global torch state or the
# evaluator through allowed modules (torch.utils.cpp_extension.os, torch.cuda.Stream,
# torch.library re-registering the reference's kernels, global module hooks, typing's eval...).
BANNED_ATTRIBUTES = frozenset(
    "os sys subprocess environ getenv system popen fork _exit kill ctypes builtins multiprocessing "
    "threading Thread Process Stream Event stream set_stream ExternalStream synchronize_stream "
    "_make_subclass perf_counter perf_counter_ns time_ns elapsed_time library overrides "
    "attrgetter methodcaller get_type_hints ForwardRef set_default_device set_default_dtype "
    "set_float32_matmul_precision set_num_threads set_num_interop_threads "
    "use_deterministic_algorithms set_flush_denormal update_wrapper wraps".split()
)
BANNED_PREFIXES = ("register_module_", "_global_")  # global nn.Module hooks outlive the candidate
DUNDER_METHODS_ALLOWED = frozenset({"__init__", "__repr__"})  # no __exit__ that swallows errors
# Reading or writing files and hubs through torch (tl.load, a Triton load, stays allowed).
BANNED_TORCH_ATTRIBUTES = frozenset("save load hub from_file load_library".split())
ALLOWED_DUNDERS = frozenset({"__init__", "__name__"})
# Fragments of C++/CUDA source (string constants) that mean side channels or async tricks.
BANNED_NATIVE = re.compile(
    r"cudaStreamCreate|cudaEventCreate|getStreamFromPool|cudaStreamNonBlocking|std::thread|"
    r"pthread_create|\bfork\s*\(|\bsystem\s*\(|\bpopen\s*\(|\bgetenv\s*\(|\bfopen\s*\(|"
    r"std::ofstream|std::ifstream|<fstream>|\bdlopen\s*\(|\bexecv|\bsocket\s*\(|cudaDeviceReset|"
    r"cudaHostAlloc|cudaMallocManaged|\bmmap\s*\(|\bkill\s*\(|getppid|\b_exit\s*\(|\bexit\s*\(|\bfstat|"
    r"\bdup2?\s*\(|syscall|\bwrite\s*\(|\bread\s*\(|\bopen\s*\(|ptrace|<unistd\.h>|<sys/|<fcntl\.h>|"
    r"<signal\.h>|<dlfcn\.h>|<spawn\.h>|<pthread\.h>|<thread>|<filesystem>|\babort\s*\("
)


@dataclass(frozen=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.docstrings: set[int] = set()  # prose, not native source: not checked for C calls
        self.modules: dict[str, str] = {}  # local name bound by an import -> its top-level package

    def flag(self, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), message))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
            self.modules[(alias.asname or alias.name).split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag(node, "relative imports are not allowed")
        self._check_module(node, node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.flag(node, "star imports are not allowed")
            if (
                alias.name in BANNED_ATTRIBUTES
                or alias.name == "Model"
                or alias.name.startswith("_")
                or alias.name.startswith(BANNED_PREFIXES)
            ):
                self.flag(node, f"importing '{alias.name}' is not allowed")
            self.modules[alias.asname or alias.name] = (node.module or "").split(".")[0]

    def _check_module(self, node: ast.AST, name: str) -> None:
        root = name.split(".")[0]
        if root not in ALLOWED_IMPORTS:
            self.flag(
                node,
                f"import of '{name}' is not allowed (only torch, triton and pure helpers "
                "such as math and functools)",
            )
        elif any(part in BANNED_ATTRIBUTES for part in name.split(".")[1:]):
            self.flag(node, f"import of '{name}' is not allowed")

    def visit_Try(self, node: ast.AST) -> None:
        self.flag(node, "try/except is not allowed: a fallback would hide a broken kernel")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            text = ast.unparse(base)
            if text == "Model" or text.endswith(".Model"):
                self.flag(node, f"class {node.name} subclasses the reference Model")
            if text.split(".")[-1] in ("Tensor", "Parameter"):
                self.flag(node, f"class {node.name} subclasses {text}: tensor subclasses are not allowed")
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            if item.name in ("__torch_function__", "__torch_dispatch__"):
                self.flag(item, f"{item.name} is not allowed (lazy or intercepted outputs)")
            elif item.name.startswith("__") and item.name not in DUNDER_METHODS_ALLOWED:
                self.flag(
                    item, f"defining {item.name} is not allowed (e.g. an __exit__ that swallows errors)"
                )
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Model":
            self.flag(node, "the reference Model may not be used by a candidate")
        elif node.id.startswith("__") and node.id.endswith("__") and node.id != "__name__":
            self.flag(node, f"'{node.id}' is not allowed")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root_module = self.modules.get(_root_name(node))
        if node.attr in BANNED_ATTRIBUTES or node.attr.startswith(BANNED_PREFIXES):
            self.flag(node, f"'.{node.attr}' is not allowed")
        elif root_module and node.attr.startswith("_") and not node.attr.startswith("__"):
            self.flag(node, f"'{ast.unparse(node)}': private members of {root_module} are not allowed")
        elif node.attr in BANNED_TORCH_ATTRIBUTES and root_module == "torch":
            self.flag(node, f"'{ast.unparse(node)}' is not allowed (file and hub access)")
        elif node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
            self.flag(node, f"'.{node.attr}' is not allowed")
        elif node.attr == "Model":
            self.flag(node, "the reference Model may not be used by a candidate")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in BANNED_CALLS:
            self.flag(node, f"calling {node.func.id}() is not allowed")
        self.generic_visit(node)

    def _check_targets(self, node: ast.AST, targets: list[ast.AST]) -> None:
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and _root_name(sub) in self.modules:
                    self.flag(node, f"assigning to '{ast.unparse(sub)}' patches an imported module")
                    break

    def visit_Assign(self, node: ast.Assign) -> None:
        self._check_targets(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_targets(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._check_targets(node, node.targets)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.flag(node, "global statements are not allowed (module-level state across calls)")

    def visit_Constant(self, node: ast.Constant) -> None:
        if (
            isinstance(node.value, str)
            and id(node) not in self.docstrings
            and (match := BANNED_NATIVE.search(node.value))
        ):
            self.flag(
                node,
                f"native source uses '{match.group(0).strip()}' (streams, threads, files, "
                "processes and environment are not allowed)",
            )


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
    takes is left to a GPU launch check (not yet)."""
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


MUTATORS = frozenset("append extend update setdefault add insert pop popitem clear remove discard".split())


def _module_state(tree: ast.Module) -> list[Violation]:
    """Module-level containers that functions mutate: a cache that outlives calls (exploit 13)."""
    containers = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and (
            isinstance(node.value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp)
            or (
                _root_name(node.value) in ("dict", "list", "set", "defaultdict", "OrderedDict", "deque")
                and isinstance(node.value, ast.Call)
            )
        ):
            containers |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    violations = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            stored = isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del)
            mutated = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATORS
            )
            target = node.value if stored else node.func.value if mutated else None
            if isinstance(target, ast.Name) and target.id in containers:
                violations.append(
                    Violation(
                        node.lineno,
                        f"module-level {target.id} is mutated by "
                        f"{func.name}(): state that outlives a call "
                        "(a result cache) is not allowed",
                    )
                )
    return violations


def check_source(source: str) -> list[Violation]:
    """All violations in `source`; [] means it may run. A syntax error is not a violation."""
    tree = ast.parse(source)
    checker = _Checker()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                checker.docstrings.add(id(first.value))
    checker.visit(tree)
    checker.violations += _decoys(tree) + _module_state(tree)
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        checker.violations.insert(0, Violation(0, "no top-level class ModelNew"))
    return checker.violations


def candidate_backend(source: str) -> str:
    """What actually runs: 'cuda' (a load_inline extension, built and used), 'triton' (a launched
    @triton.jit kernel) or 'torch'; from the AST, never by running."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "torch"
    decoy = bool(_decoys(tree))
    if not decoy and any(_is_call_to(n, "load_inline") for n in _eager_nodes(tree)):
        return "cuda"
    return "triton" if _jitted(tree) and not decoy else "torch"
