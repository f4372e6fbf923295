"""The trust boundary on its own: `Evaluator.measure` skips the static pre-filter, so these
candidates do what the pre-filter would refuse, and every verdict and side effect here comes from
the process split (trusted / untrusted worker) and the OS sandbox (warpk.evaluator.sandbox).

Side effects are checked from OUTSIDE the sandbox, in this test process: files on the host,
processes in the host's /proc, a TCP listener on the host's loopback. Where a check could pass
only because the sandbox hides something from the candidate, a `process`-mode control run shows
the same candidate does reach it without the sandbox.
"""

import os
import secrets
import signal
import socket
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator
from warpk.evaluator import sandbox as sandbox_module
from warpk.evaluator.roofline import implausible_reason, roofline_floor_ms
from warpk.evaluator.sandbox import (
    SANDBOX_HOME,
    SCRATCH_LIMIT_BYTES,
    bwrap_command,
    resolve_sandbox,
    worker_env,
)
from warpk.tasks import load_task_file

SOFTMAX = REPO / "kernelbench" / "problems" / "01_softmax.py"
HEAD = "import torch\nimport torch.nn as nn\n"

needs_bwrap = pytest.mark.skipif(
    not os.path.exists("/usr/bin/bwrap") and not any(
        os.path.exists(os.path.join(p, "bwrap")) for p in os.environ.get("PATH", "").split(":")
    ),
    reason="bubblewrap is not installed (make test installs it on Debian/Ubuntu)",
)


def _hardware(name: str) -> HardwareConfig:
    raw = yaml.safe_load((REPO / "conf" / "hardware" / f"{name}.yaml").read_text())
    return HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})


# One evaluator per protocol for the module: its lane stays warm between tests (as between a
# GRPO run's batches), so each test's candidate is one more adversary through a used lane.
EVALUATORS: dict[tuple, Evaluator] = {}


@pytest.fixture(autouse=True, scope="module")
def _close_evaluators():
    yield
    while EVALUATORS:
        EVALUATORS.popitem()[1].close()


def _measure(source: str, sandbox: str = "bwrap", fresh: bool = False, **protocol):
    """One candidate for 01_softmax, static pre-filter skipped. `fresh`: an evaluator of its own
    (workers started now, e.g. after the test changed the parent's environment)."""
    settings = dict(result_cache=False, timing_batches=3, batch_target_ms=2.0, run_timeout_s=10.0,
                    memory_limit_gb=2.0, sandbox=sandbox)
    config = EvaluateConfig(**{**settings, **protocol})
    key = tuple(sorted({**settings, **protocol}.items()))
    if fresh:
        with Evaluator(config, _hardware("cpu")) as evaluator:
            return evaluator.measure(EvalItem(load_task_file(SOFTMAX), source, "sandbox_probe.py"))
    evaluator = EVALUATORS.get(key) or EVALUATORS.setdefault(key, Evaluator(config, _hardware("cpu")))
    return evaluator.measure(EvalItem(load_task_file(SOFTMAX), source, "sandbox_probe.py"))


def _forward(body: str, prelude: str = "") -> str:
    """A candidate whose forward runs `body` (indented 8 spaces) and then returns a softmax."""
    return (
        HEAD
        + prelude
        + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
        + "".join(f"        {line}\n" for line in body.splitlines())
        + "        return torch.softmax(x, dim=-1)\n"
    )


def _processes_with(marker: str) -> list[int]:
    """Live host processes whose command line contains `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if state not in ("Z", "X") and marker.encode() in cmdline:
            found.append(int(proc.name))
    return found


def _kill_all(marker: str) -> None:
    for pid in _processes_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- the sandbox is there, or evaluation refuses ----------------------------------------------
@needs_bwrap
def test_auto_resolves_to_bwrap_here():
    assert resolve_sandbox("auto") == "bwrap"
    assert resolve_sandbox("process") == "process"


def test_no_bwrap_refuses_to_evaluate_and_says_what_to_do(monkeypatch):
    sandbox_module._resolve_sandbox.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(Exception, match="evaluate.sandbox=process"):
            resolve_sandbox("auto")
        assert resolve_sandbox("process") == "process"
    finally:
        sandbox_module._resolve_sandbox.cache_clear()


def test_the_bwrap_command_mounts_only_what_python_needs():
    cmd = " ".join(bwrap_command(None, None))
    assert "--ro-bind / /" not in cmd and "--remount-ro /" in cmd
    assert f"--ro-bind {REPO / 'warpk'} {REPO / 'warpk'}" in cmd
    # the folders above a mount point are the sandbox's own (empty, 0755: `--dir`), never bound
    for absent in (f" {REPO} ", f"{REPO / 'tests'}", "/etc/shadow", " /home ", " /run ", " /opt "):
        assert absent.strip() not in sources(cmd)
    # the working dir is on the sandbox's own capped tmpfs: no host folder is bound writable
    assert cmd.startswith(f"bwrap --size {SCRATCH_LIMIT_BYTES} --perms 1777 --tmpfs /tmp --perms 1777 "
                          f"--dir {SANDBOX_HOME} ")
    assert f"--chdir {SANDBOX_HOME}" in cmd and "--bind " not in cmd
    assert all(f"--unshare-{ns}" in cmd for ns in ("ipc", "pid", "net", "uts", "cgroup-try"))
    assert "--die-with-parent" in cmd and "--cap-drop ALL" in cmd
    assert "/dev/nvidia" not in cmd  # a CPU lane gets no GPU device node
    build = "/cache/torch_extensions/abc"
    assert f"--bind {build} {build}" in " ".join(bwrap_command(Path(build), None))  # the only one


def sources(cmd: str) -> set[str]:
    """The host paths a bwrap command line binds."""
    words = cmd.split()
    return {words[i + 1] for i, w in enumerate(words) if w.endswith(("bind", "bind-try"))}


# --- deaths and limits ------------------------------------------------------------------------
@pytest.mark.slow
@needs_bwrap
def test_os_exit_is_a_crash_not_a_success():
    record = _measure(_forward("os._exit(3)", prelude="import os\n"))
    assert record.status == "crashed"
    assert "the candidate's worker died in the correctness phase" in record.error
    assert record.sandbox == "bwrap"


@needs_bwrap
def test_segfault_through_ctypes_is_a_crash_with_the_signal():
    record = _measure(_forward("ctypes.string_at(0)", prelude="import ctypes\n"))
    assert record.status == "crashed"
    assert "SIGSEGV" in record.error


@needs_bwrap
def test_growing_host_memory_is_killed_by_the_watchdog():
    """Touched pages count in RSS and in the sandbox's memory cgroup: whichever sees 2 GB first
    (the parent's watchdog summing its process tree, or the kernel) kills the sandbox long before
    RLIMIT_AS (2 + 4 GB) is reached -> crashed, with that limit named."""
    record = _measure(_forward("keep = [torch.ones(64 * 2**20) for _ in range(10**6)]"))
    assert record.status == "crashed"
    assert ("exceeded the host memory limit of 2 GB" in record.error
            or "over its memory limit" in record.error), record.error


@needs_bwrap
def test_one_huge_allocation_fails_on_the_address_space_limit():
    record = _measure(_forward("big = torch.empty(2**31)"))
    assert record.status == "runtime_error"
    assert "forward raised" in record.error and "can't allocate memory" in record.error


@pytest.mark.slow
@needs_bwrap
def test_a_loop_in_forward_times_out_in_seconds_not_minutes():
    """The limit of a step is run_timeout_s + run_timeout_factor x the reference's time for it:
    a hung candidate on a millisecond task costs about run_timeout_s."""
    start = time.monotonic()
    record = _measure(_forward("while True:\n    x = x * 1.0"), run_timeout_s=3.0)
    assert record.status == "timeout"
    prefix = "the correctness phase exceeded its limit of "
    assert record.error.startswith(prefix) and record.error.endswith(" s"), record.error
    # 3 s plus the factor x the reference's time (a loaded machine's millisecond call: ~2 s more)
    assert 3.0 <= float(record.error[len(prefix):-2]) < 10.0, record.error
    assert time.monotonic() - start < 30


@pytest.mark.slow
@needs_bwrap
def test_a_loop_at_import_times_out_at_the_compile_limit():
    record = _measure(_forward("pass", prelude="while True:\n    pass\n"), compile_timeout_s=4.0)
    assert record.status == "timeout"
    assert "the load phase exceeded its limit of 4 s" in record.error


@needs_bwrap
def test_file_size_limit_stops_a_huge_write():
    body = "with open('big.bin', 'wb') as f:\n    f.seek(1100 * 2**30)\n    f.write(b'x')"  # sparse
    record = _measure(_forward(body))
    assert record.status == "runtime_error"
    assert "File too large" in record.error


# --- escapes, checked from the host ----------------------------------------------------------
def _writer(target: Path) -> str:
    return _forward("pass", prelude=f"import pathlib\npathlib.Path({str(target)!r}).write_text('escaped')\n")


@needs_bwrap
def test_files_outside_the_sandbox_are_out_of_reach(tmp_path):
    """Writes to the host's /tmp (tmp_path), the project tree and $HOME land nowhere: the
    candidate raises (its private /tmp has no such folder; the project tree and $HOME are empty
    and read-only) and the host's files do not appear."""
    name = f"warpk-escape-{secrets.token_hex(4)}"
    for target in (tmp_path / name, REPO / name, Path.home() / name):
        record = _measure(_writer(target))
        private = Path("/tmp") in target.parents and target.parent.exists()  # e.g. a clone in /tmp:
        if not private or target.parent == tmp_path:  # then it lands in the sandbox's own /tmp
            assert record.status == "compile_error", (target, record.error)
        assert not target.exists(), f"the candidate wrote {target} on the host"


def test_the_file_escape_control_works_without_the_sandbox(tmp_path):
    """Control for the test above: in process mode the same candidate does write the file."""
    target = tmp_path / "escaped.txt"
    record = _measure(_writer(target), sandbox="process")
    assert target.read_text() == "escaped" and record.status == "ok"


@needs_bwrap
def test_no_network_even_to_the_hosts_loopback():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        connect = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\n"
        source = _forward("pass", prelude=connect)
        record = _measure(source)
        # a CPU lane's filter refuses the socket itself (red team round 73), a GPU lane's netns has
        # only its own loopback
        assert record.status == "compile_error"
        assert "ConnectionRefused" in record.error or "Address family not supported" in record.error
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing ever connected on the host
    finally:
        listener.close()


@pytest.mark.slow
@needs_bwrap
def test_children_die_with_the_sandbox_even_in_a_new_session():
    """The candidate starts a `sleep` in its own session at import (escaping any process-group
    kill) and hangs: the PID namespace dies with the sandbox, so the host has no such process."""
    marker = f"{1000 + secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    prelude = f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
    try:
        record = _measure(_forward("while True:\n    pass", prelude=prelude), run_timeout_s=2.0)
        assert record.status == "timeout"
        deadline = time.monotonic() + 5
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _processes_with(marker), "a child of the candidate survived its sandbox"
    finally:
        _kill_all(marker)


@needs_bwrap
def test_home_secrets_and_environment_are_not_readable(monkeypatch):
    """A token in the real $HOME and in the parent's environment: the candidate reads what it
    can and raises it into its error text (the record); neither token gets there."""
    monkeypatch.setenv("HF_TOKEN", "secret-hf-token")
    token = secrets.token_hex(8)
    secret = Path.home() / f".warpk-secret-{token}"
    secret.write_text(token)
    try:
        probe = (
            "import os, pathlib\n"
            f"p = pathlib.Path({str(secret)!r})\n"
            "raise RuntimeError((p.read_text() if p.exists() else 'no secret') + repr(dict(os.environ)))\n"
        )
        record = _measure(_forward("pass", prelude=probe), fresh=True)  # workers started with HF_TOKEN set
        assert record.status == "compile_error"
        assert "no secret" in record.error
        assert token not in record.error and "secret-hf-token" not in record.error
    finally:
        secret.unlink()


# --- the trusted side is not fooled by the candidate's process -----------------------------------
@needs_bwrap
def test_a_forged_answer_on_the_socket_is_not_believed():
    """The candidate finds its socket in /proc/self/fd and, at the first forward, writes its own
    'Ran' frame (ok, no outputs) before returning zeros: the trusted side gets a frame it did
    not ask for, or outputs that are wrong; never ok."""
    prelude = (
        "import json, os, socket, struct\n"
        "def forge():\n"
        "    for fd in os.listdir('/proc/self/fd'):\n"
        "        link = '/proc/self/fd/' + fd\n"
        "        if os.path.exists(link) and os.readlink(link).startswith('socket:'):\n"
        "            s = socket.socket(fileno=int(fd))\n"
        "            ran = {'type': 'Ran', 'status': 'ok', 'outputs': [[]], 'compute_ms': 0.001}\n"
        "            msg = json.dumps(ran).encode()\n"
        "            s.sendall(struct.pack('!I', len(msg)) + msg)\n"
        "            s.detach()\n"
    )
    source = HEAD + prelude + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
    source += "        forge()\n        return torch.zeros_like(x)\n"
    record = _measure(source)
    assert record.status in ("crashed", "incorrect"), record
    assert record.runtime_ms is None


@needs_bwrap
def test_rebinding_the_comparison_functions_changes_nothing():
    """torch.allclose/equal/isclose made to always agree, in the candidate's process, and a
    zero output: the comparison happens in the trusted worker."""
    prelude = (
        "import torch as T\n"
        "T.allclose = lambda *a, **k: True\nT.equal = lambda *a, **k: True\n"
        "T.isclose = lambda a, b, **k: T.ones_like(a, dtype=T.bool)\n"
    )
    source = HEAD + prelude + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
    source += "        return torch.zeros_like(x)\n"
    record = _measure(source)
    assert record.status == "incorrect" and "trial 0" in record.error


@needs_bwrap
def test_a_clock_that_lies_changes_nothing():
    """The candidate does the softmax 100 times per call and makes its own clock
    (time.perf_counter_ns) run 1000x slow: evaluator v3 reads no time the candidate reports
    (only the trusted worker's clock, around the same round trip for both sides), so the lie
    buys nothing and the candidate is as slow as its 100 softmaxes: well below 1x. (With 10,
    the round trip's share left the interval's upper end at 1.06 once, beside the other xdist
    worker's evaluations on the same two cores, 2026-12-06.)"""
    prelude = (
        "import time\n"
        "_real = time.perf_counter_ns\n_t0 = _real()\n"
        "time.perf_counter_ns = lambda: _t0 + (_real() - _t0) // 1000\n"
    )
    body = "for _ in range(100):\n    y = torch.softmax(x, dim=-1)"
    record = _measure(_forward(body, prelude=prelude))
    assert record.status == "ok", record.error
    assert record.speedup_high < 1, record


@pytest.mark.slow
@needs_bwrap
def test_an_honest_candidate_is_ok_with_a_speedup_interval():
    honest = (REPO / "kernelbench" / "solutions" / "01_softmax" / "torch_fused.py").read_text()
    record = _measure(honest, timing_batches=6)
    assert record.status == "ok", record.error
    assert record.speedup_low <= record.speedup <= record.speedup_high
    assert record.calls_per_batch >= 1 and record.timing_batches >= 3
    assert record.sandbox == "bwrap"


@pytest.mark.slow
@needs_bwrap
def test_a_huge_tasks_inputs_changed_in_place_are_incorrect_on_the_cpu(monkeypatch):
    """Red team round 13: on the CPU a task over BIG_IO_BYTES of inputs and outputs gives its
    inputs away once packed (one copy in memory), and nothing compared them afterwards, so an
    in-place softmax was `ok` (2 of 2 runs at 9000 x 16384). The memfd's hash, taken before the
    worker has it and again while it is frozen after its answer, now stands for them. The huge
    path is forced on the small shape here (every call is huge); the honest twin stays `ok`."""
    monkeypatch.setenv("WARPK_TEST_BIG_IO_BYTES", "1")
    in_place = HEAD + (
        "class ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        x -= x.amax(dim=-1, keepdim=True)\n        x.exp_()\n"
        "        x /= x.sum(dim=-1, keepdim=True)\n        return x\n"
    )
    config = EvaluateConfig(result_cache=False, timing_batches=3, batch_target_ms=2.0, run_timeout_s=10.0,
                            memory_limit_gb=2.0)  # fmt: skip
    with Evaluator(config, _hardware("cpu")) as evaluator:
        task = load_task_file(SOFTMAX)
        liar = evaluator.measure(EvalItem(task, in_place, "in_place_huge.py"))
        twin = evaluator.measure(EvalItem(task, _forward("pass"), "honest_huge.py"))
    assert liar.status == "incorrect", (liar.status, liar.error)
    assert "modified its inputs in place" in liar.error
    assert twin.status == "ok", twin.error


# --- roofline ---------------------------------------------------------------------------------
def test_roofline_floor_on_h200_compute_bound_gemm():
    """4096^3 GEMM: 2*4096^3 = 1.374e11 FLOP at the bf16 peak 989.4 TFLOP/s = 0.1389 ms; moving
    three 4096^2 fp32 matrices (201,326,592 B) at 4800 GB/s = 0.0419 ms: compute bound."""
    h200 = _hardware("h200")
    flops, min_bytes = 2 * 4096**3, 3 * 4096 * 4096 * 4
    floor_ms = roofline_floor_ms(flops, min_bytes, h200)
    assert floor_ms == pytest.approx(1.37438953472e11 / 989.4e12 * 1e3, rel=1e-12)
    assert floor_ms == pytest.approx(0.138911, rel=1e-5)
    reason = implausible_reason(0.1, floor_ms, h200)
    assert reason.startswith("runtime 0.1 ms is below the roofline floor 0.1389 ms of hardware=h200")
    assert "(1.4x faster than physically possible)" in reason
    assert implausible_reason(0.2, floor_ms, h200) is None
    assert implausible_reason(floor_ms, floor_ms, h200) is None  # at the floor is possible


def test_roofline_floor_on_h200_memory_bound_softmax():
    h200 = _hardware("h200")
    floor_ms = roofline_floor_ms(0.0, 2 * 4096 * 16384 * 4, h200)
    assert floor_ms == pytest.approx(536870912 / 4800e9 * 1e3, rel=1e-12)
    assert "(5.6x faster than physically possible)" in implausible_reason(0.02, floor_ms, h200)


def test_roofline_does_not_judge_the_cpu_profile():
    cpu = _hardware("cpu")
    floor_ms = roofline_floor_ms(2 * 256 * 512 * 256, 3 * 256 * 512 * 4, cpu)
    assert floor_ms > 0
    assert implausible_reason(floor_ms / 1000, floor_ms, cpu) is None


@pytest.mark.gpu
def test_a_timer_lie_on_the_gpu_gains_nothing():
    """The candidate makes torch.cuda.Event.elapsed_time return 1 us in its own process. Its
    time is the trusted worker's clock (evaluator v3), so the lie is never read: `ok` at the speed
    of its honest twin (the same torch.softmax without the lie), which is itself faster than the
    task's four-pass reference (1.39x on an H100 on 2026-12-05, ~1.2-1.3x on the H200), so the
    bound is the twin's, not 1. v2 called the lie `implausible` from the self-report; read, it
    would claim ~2000x."""
    source = _forward("pass", prelude="torch.cuda.Event.elapsed_time = lambda self, end: 0.001\n")
    protocol = EvaluateConfig(result_cache=False, timing_batches=5, run_timeout_s=120.0, gpus=[0])
    with Evaluator(protocol, _hardware("h200")) as evaluator:
        task = load_task_file(SOFTMAX)
        liar = evaluator.measure(EvalItem(task, source, "timer_lie.py"))  # no static pre-filter
        twin = evaluator.measure(EvalItem(task, _forward("pass"), "honest_twin.py"))
    assert liar.status == "ok" and twin.status == "ok", (liar.error, twin.error)
    assert liar.speedup_low <= 1.25 * twin.speedup_high, (liar.speedup, twin.speedup)


def test_compiler_prefixes_are_mounted_but_never_a_home_or_the_project(monkeypatch):
    """A cluster's gcc in /opt is mounted (read-only) for load_inline; a `pip install --user`
    ninja in ~/.local, a compiler in the project tree or in /tmp would expose private files: never."""
    from warpk.evaluator import mounts, sandbox

    home = sandbox.Path.home().resolve()
    found = {
        "g++": "/opt/gcc-13/bin/g++",
        "ninja": str(home / ".local" / "bin" / "ninja"),
        "nvcc": "/usr/local/cuda/bin/nvcc",  # under /usr: mounted already
        "gcc": str(sandbox.PROJECT_ROOT / "tools" / "bin" / "gcc"),
        "cc": str(sandbox.PROJECT_ROOT.parent / "bin" / "cc"),  # its prefix is above the project
        # the host's temp folder holds the run's pool gate (red team round 22)
        "c++": str(sandbox.Path(sandbox.tempfile.gettempdir()).resolve() / "bin" / "c++"),
        "relcc": "bin/relcc",  # $CC found through a relative PATH entry (round 25): `--ro-bind . .`
    }
    monkeypatch.setenv("CC", "relcc")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: found.get(name))
    assert mounts.toolchain_prefixes() == [sandbox.Path("/opt/gcc-13")]


def test_a_home_or_a_folder_above_a_private_one_on_sys_path_is_never_mounted(monkeypatch, tmp_path):
    """Red team round 23: a script run from ~ put all of ~ on sys.path (the cache's build locks,
    ~/.ssh), and a folder above $TMPDIR covered the run's pool gate. A venv inside ~ stays."""
    import site

    from warpk.evaluator import mounts, sandbox

    home = tmp_path / "home"
    venv_site = home / "proj" / ".venv" / "lib" / "site-packages"
    scratch = tmp_path / "scratch"
    for folder in (venv_site, scratch / "tmp"):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(scratch / "tmp"))
    monkeypatch.setattr(sandbox.tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    workspace = tmp_path / "workspace"  # `cd /workspace && python -m warpk` (round 24): every run's outputs
    workspace.mkdir()
    on_path = [home, venv_site, scratch, workspace, "/tmp", "/"]
    monkeypatch.setattr(sandbox.sys, "path", [str(p) for p in on_path])
    mounted = mounts.python_paths()
    assert venv_site.resolve() in mounted
    for never in (home, scratch, workspace, sandbox.Path("/tmp"), sandbox.Path("/")):
        assert never.resolve() not in mounted
    monkeypatch.setenv("CUDA_HOME", str(home))
    assert str(home) not in sources(" ".join(sandbox.bwrap_command(None, None)))
    # round 25: a .pth's folder (an editable install) is mounted, unless it is a private one
    checkout, sitedir = tmp_path / "src" / "mylib", tmp_path / "site"
    checkout.mkdir(parents=True)
    sitedir.mkdir()
    (sitedir / "mylib.pth").write_text(f"{checkout}\nimport os\n{home}\n# {scratch}\n")
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(sitedir)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(tmp_path / "nowhere"))
    mounted = mounts.python_paths()
    assert checkout.resolve() in mounted and home.resolve() not in mounted
    # round 26: a .pth line through a symlink is bound where Python will look for it, and a .pth
    # that cannot be read (a FIFO, a loop) is skipped, as site skips it
    (tmp_path / "ws").symlink_to(tmp_path / "src", target_is_directory=True)
    (sitedir / "viaws.pth").write_text(f"{tmp_path / 'ws' / 'mylib'}\n")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (sitedir / "loop.pth").write_text(f"{tmp_path / 'loop'}\n")
    os.mkfifo(sitedir / "fifo.pth")
    binds = " ".join(mounts.host_folders(sandbox.PACKAGE_DIR))
    assert f"--ro-bind {checkout.resolve()} {tmp_path / 'ws' / 'mylib'}" in binds
    # an evaluator's configured cache is private too: a compiler installed above it is not mounted
    from warpk import paths

    monkeypatch.setattr(paths, "KEPT_PRIVATE", {(tmp_path / "opt" / "cache").resolve()})
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(tmp_path / "opt" / "bin" / name))
    assert mounts.toolchain_prefixes() == []
    # round 26: ~/bin/gcc named through a symlinked parent (/users -> /nfs) is ~ all the same
    (tmp_path / "users").symlink_to(tmp_path, target_is_directory=True)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(tmp_path / "users" / "home" / "bin" / name))
    assert mounts.toolchain_prefixes() == []
    # round 27: a prefix that resolves into a system folder is still mounted (as its symlink)
    monkeypatch.setattr(mounts, "private_folders", lambda: [home.resolve()])  # tmp_path is in /tmp
    (tmp_path / "cuda").symlink_to("/usr", target_is_directory=True)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(tmp_path / "cuda" / "bin" / name))
    assert mounts.toolchain_prefixes() == [tmp_path / "cuda"]


HUGE_TASK = '''import torch
import torch.nn as nn

N = 1 << 40  # 4 TiB of float32 inputs: sized on the meta device, never allocated


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''


def test_a_task_too_big_for_this_hosts_memory_is_too_big_before_anything_is_allocated(tmp_path):
    """On the CPU an allocation past the RAM ends in the kernel's OOM killer, not an error: the
    trusted worker sizes the task on the meta device first and says why it cannot run."""
    path = tmp_path / "huge_relu.py"
    path.write_text(HUGE_TASK)
    candidate = HUGE_TASK.replace("class Model(", "class ModelNew(")
    evaluator = Evaluator(EvaluateConfig(result_cache=False, sandbox="process"), _hardware("cpu"))
    start = time.monotonic()
    record = evaluator.measure(EvalItem(load_task_file(path), candidate, "copy.py"))
    assert record.status == "too_big", record.error
    assert "of host memory" in record.error and "sandboxes may hold" in record.error
    assert time.monotonic() - start < 120  # decided on sizes, not by filling 4 TiB


def test_the_host_peak_is_sized_from_inputs_and_outputs_on_the_meta_device():
    import types

    import torch

    from warpk.evaluator.hostmem import host_peak_bytes

    task = types.ModuleType("t")
    exec(HUGE_TASK.replace("1 << 40", "1 << 20"), task.__dict__)  # 4 MiB in, 4 MiB out
    assert host_peak_bytes(torch, task) == 3 * (4 << 20) + 2 * (4 << 20)  # max(2I, I + 2O) + I + O
    task.get_inputs = lambda: [torch.randn(3).tolist()]  # not a tensor program: unsized
    task.Model = lambda: (_ for _ in ()).throw(RuntimeError("data-dependent"))
    assert host_peak_bytes(torch, task) is None


def test_too_big_on_the_cpu_is_decided_from_the_hosts_total_not_the_moments_free(monkeypatch, tmp_path):
    # Red team round 15: a sibling in the compile pool held 11 GiB for a minute, MemAvailable fell,
    # and an honest copy came out `too_big` (scored as incorrect).
    import builtins
    import types

    import torch

    from warpk.evaluator import hostmem
    from warpk.evaluator.checks import Verdict

    task = types.ModuleType("t")
    exec(HUGE_TASK.replace("1 << 40", "1 << 20"), task.__dict__)  # needs 20 MiB in this protocol
    meminfo = tmp_path / "meminfo"
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open",
                        lambda f, *a, **k: real_open(meminfo if f == "/proc/meminfo" else f, *a, **k))
    meminfo.write_text("MemTotal:       33554432 kB\nMemAvailable:          4 kB\n")  # 32 GiB, none free now
    hostmem.check_host_memory(torch, task)  # fits the host: runs, whatever is free at this moment
    monkeypatch.setattr(hostmem, "sandbox_budget_bytes", lambda: 10 << 20)
    with pytest.raises(Verdict, match="sandboxes may hold 0.0 GiB") as caught:
        hostmem.check_host_memory(torch, task)
    assert caught.value.status == "too_big"


@pytest.mark.slow
@needs_bwrap
def test_a_candidate_killed_for_the_budget_over_all_sandboxes_is_measured_again_and_told_why(
        monkeypatch, private_budget):
    """Red team round 16: other sandboxes' memory filled the budget group every sandbox lies below
    and honest candidates were `crashed`, "over its memory limit". A kill for the budget (not the
    candidate's own limit) before any timed batch is measured once more, and if it comes again
    the reason says whose memory it was. Here the candidate (and the spare) lie below a budget
    of 1.5 GiB and the candidate takes 2 GiB of its own 3 GB (+1 GiB headroom)."""
    from warpk.evaluator import lane as lane_module

    attempts = []
    once = lane_module.Lane._measure_once
    monkeypatch.setattr(lane_module.Lane, "_measure_once", lambda *a: attempts.append(1) or once(*a))
    private_budget(3 << 29)
    hog = _forward("global HOG\nHOG = b'x' * (2 << 30)")  # written at once: no page-by-page crawl
    record = _measure(hog, fresh=True, memory_limit_gb=3.0, run_timeout_s=60.0)  # reclaim is slow
    assert record.status == "crashed" and "memory budget for all sandboxes" in record.error, record.error
    assert len(attempts) == 2


def test_the_workers_allocator_is_ours_to_set_not_the_trainers(monkeypatch):
    """Every worker (trusted, reference, candidate) gets WARPK_WORKER_ALLOC_CONF as its CUDA
    allocator setting alike; a trainer's own PYTORCH_CUDA_ALLOC_CONF and secrets stay out."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("HF_TOKEN", "secret-hf-token")
    env = worker_env(SANDBOX_HOME, 1, {})
    assert "PYTORCH_CUDA_ALLOC_CONF" not in env and "HF_TOKEN" not in env
    monkeypatch.setenv("WARPK_WORKER_ALLOC_CONF", "expandable_segments:True")
    assert worker_env(SANDBOX_HOME, 1, {})["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
