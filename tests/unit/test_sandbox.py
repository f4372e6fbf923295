"""The sandbox on its own: `Evaluator.measure` runs candidates that the static checks would refuse
(it skips them), to show what the process boundary alone covers (warpk.evaluator.sandbox, threat
model): deaths, hangs, memory, file size, spawned processes, environment. Plus the roofline floor.

Each candidate is a few lines of source; the ones that spawn or probe write to a file under the
test's tmp_path, whose path is pasted into their source.
"""

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import DATA, REPO
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator
from warpk.evaluator.roofline import implausible_reason, roofline_floor_ms
from warpk.evaluator.sandbox import Limits, WorkerProcess
from warpk.tasks import load_task_file

SOFTMAX = REPO / "kernelbench" / "problems" / "01_softmax.py"
HEAD = "import torch\nimport torch.nn as nn\n"


def _hardware(name: str) -> HardwareConfig:
    raw = yaml.safe_load((REPO / "conf" / "hardware" / f"{name}.yaml").read_text())
    return HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})


def _measure(source: str, **protocol):
    """One candidate for 01_softmax in a fresh worker, static checks skipped."""
    settings = dict(
        result_cache=False, timing_trials=3, warmup_calls=0, run_timeout_s=10.0, memory_limit_gb=2.0
    )
    evaluator = Evaluator(EvaluateConfig(**{**settings, **protocol}), _hardware("cpu"))
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


def _alive(pid: int) -> bool:
    """True if `pid` is a live (not zombie) `sleep` process: guards against pid reuse too."""
    proc = Path(f"/proc/{pid}")
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = (proc / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X") and cmdline.startswith(b"sleep")


def _wait_dead(pid: int, timeout_s: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _spawner(pid_file: Path, new_session: bool) -> str:
    """Spawns `sleep 1000` at import, writes its pid, then hangs in forward."""
    return _forward(
        "time.sleep(1000)",
        prelude=(
            "import subprocess\nimport time\n"
            f"child = subprocess.Popen(['sleep', '1000'], start_new_session={new_session})\n"
            f"with open({str(pid_file)!r}, 'w') as f:\n    f.write(str(child.pid))\n"
        ),
    )


# --- deaths ---------------------------------------------------------------------------------
def test_os_exit_is_a_crash_not_a_success():
    record = _measure(_forward("os._exit(0)", prelude="import os\n"))
    assert record.status == "crashed"
    assert "before reporting a result" in record.error


def test_segfault_through_ctypes_is_a_crash_with_the_signal():
    record = _measure(_forward("ctypes.string_at(0)", prelude="import ctypes\n"))
    assert record.status == "crashed"
    assert "SIGSEGV" in record.error


# --- memory -----------------------------------------------------------------------------------
def test_growing_host_memory_is_killed_by_the_watchdog():
    """Touched pages count in RSS: the parent's watchdog (polling every 20 ms) sees 2 GB long
    before RLIMIT_AS (2 + 4 GB) is reached, and kills the group -> crashed."""
    record = _measure(_forward("keep = [torch.ones(64 * 2**20) for _ in range(10**6)]"), memory_limit_gb=2.0)
    assert record.status == "crashed"
    assert "exceeded the host memory limit of 2 GB" in record.error


def test_one_huge_allocation_fails_on_the_address_space_limit():
    """An 8 GB allocation never becomes resident: the watchdog cannot see it, but RLIMIT_AS
    (memory_limit_gb + 4 GB, CPU workers only) makes malloc fail, which torch raises in forward
    -> runtime_error, and the machine never lends the pages."""
    record = _measure(_forward("big = torch.empty(2**31)"), memory_limit_gb=2.0)
    assert record.status == "runtime_error"
    assert "forward raised" in record.error and "can't allocate memory" in record.error


# --- time -------------------------------------------------------------------------------------
def test_a_loop_in_forward_times_out_at_the_run_limit():
    start = time.monotonic()
    record = _measure(_forward("while True:\n    x = x * 1.0"), run_timeout_s=5.0)
    assert record.status == "timeout"
    assert record.error == "the run phase exceeded its limit of 5 s; worker killed"
    assert time.monotonic() - start < 30


def test_a_loop_at_import_times_out_at_the_compile_limit():
    record = _measure(_forward("pass", prelude="while True:\n    pass\n"), compile_timeout_s=4.0)
    assert record.status == "timeout"
    assert "the compile phase exceeded its limit of 4 s" in record.error


# --- files ------------------------------------------------------------------------------------
def test_file_size_limit_stops_a_huge_write():
    """RLIMIT_FSIZE is 256 MiB. Python ignores SIGXFSZ, so the write fails with EFBIG in forward
    (runtime_error) instead of killing the worker; a seek makes it instant and sparse."""
    body = "with open('big.bin', 'wb') as f:\n    f.seek(300 * 2**20)\n    f.write(b'x')"
    record = _measure(_forward(body))
    assert record.status == "runtime_error"
    assert "File too large" in record.error


# --- processes ------------------------------------------------------------------------------
def test_children_die_with_the_worker_group(tmp_path):
    """The candidate spawns `sleep 1000` and hangs: at the run timeout the parent SIGKILLs the
    worker's process group, which the child shares."""
    pid_file = tmp_path / "child.pid"
    record = _measure(_spawner(pid_file, new_session=False), run_timeout_s=2.0)
    assert record.status == "timeout"
    pid = int(pid_file.read_text())
    assert _wait_dead(pid), f"child {pid} survived the group kill"


@pytest.mark.xfail(
    strict=True,
    reason="hole: a child that starts its own session (setsid) leaves the worker's process group "
    "and survives killpg; needs a cgroup, a PID namespace or a subreaper in the sandbox",
)
def test_children_in_a_new_session_die_with_the_worker(tmp_path):
    pid_file = tmp_path / "child.pid"
    pid = None
    try:
        record = _measure(_spawner(pid_file, new_session=True), run_timeout_s=2.0)
        assert record.status == "timeout"
        pid = int(pid_file.read_text())
        assert _wait_dead(pid, timeout_s=1.0), f"child {pid} in its own session survived"
    finally:
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)  # the escaped `sleep` this test started


# --- worker reuse ---------------------------------------------------------------------------
def _one_worker() -> WorkerProcess:
    """A CPU worker as a lane of evaluate_many holds it: reused while verdicts are ok/incorrect."""
    return WorkerProcess(Limits(60.0, 10.0, 2.0, 1, address_space_limit=True), {"CUDA_VISIBLE_DEVICES": ""})


def _two_on_one_worker(first_source: str) -> tuple:
    """(record of `first_source`, record of an honest softmax measured next on the same worker)."""
    honest = (REPO / "kernelbench" / "solutions" / "01_softmax" / "torch_fused.py").read_text()
    protocol = EvaluateConfig(result_cache=False, timing_trials=3, warmup_calls=0, memory_limit_gb=2.0)
    evaluator = Evaluator(protocol, _hardware("cpu"))
    task = load_task_file(SOFTMAX)
    worker = _one_worker()
    try:
        first = evaluator.measure(EvalItem(task, first_source, "first.py"), worker)
        second = evaluator.measure(EvalItem(task, honest, "torch_fused.py"), worker)
    finally:
        worker.close()
    return first, second


@pytest.mark.xfail(
    strict=True,
    reason="hole: a reused worker keeps global state of the previous candidate (here torch.softmax "
    "replaced through functools.update_wrapper), which corrupts the next candidate's outputs",
)
def test_a_candidate_cannot_change_the_verdict_of_the_next_one_on_its_worker():
    """An honest softmax after 28b_poison_via_update_wrapper.py on ONE worker, as evaluate_many
    runs a lane. The worker clears global hooks between candidates, not patched torch functions."""
    first, second = _two_on_one_worker((DATA / "exploits" / "28b_poison_via_update_wrapper.py").read_text())
    assert first.status == "ok"  # the poisoner itself is an honest softmax; the worker is kept
    assert second.status == "ok", f"the honest candidate after it: {second.status} ({second.error})"


def test_a_candidate_cannot_answer_for_the_next_one_on_its_worker():
    """The first candidate (static checks skipped: it imports os) writes two answer lines to the
    worker's answer pipe at import, "ok" for itself and "incorrect" for whoever comes next, then
    evaluates honestly; the parent reads one line per request."""
    lines = [
        {
            "status": "ok",
            "error": None,
            "runtime_ms": 0.01,
            "ref_runtime_ms": 1.0,
            "flops": 0.0,
            "min_bytes": 0.0,
        },
        {"status": "incorrect", "error": "forged by the previous candidate"},
    ]
    forger = _forward(
        "pass",
        prelude=(
            "import json\nimport os\n"
            f"LINES = {json.dumps(lines)!r}\n"
            "for fd in os.listdir('/proc/self/fd'):\n"
            "    link = '/proc/self/fd/' + fd\n"
            "    if fd != '0' and os.path.islink(link) and os.readlink(link).startswith('pipe:'):\n"
            "        for line in json.loads(LINES):\n"
            "            os.write(int(fd), (json.dumps(line) + '\\n').encode())\n"
        ),
    )
    first, second = _two_on_one_worker(forger)
    assert second.status == "ok", f"the honest candidate after it: {second.status} ({second.error})"


# --- environment and working dir -----------------------------------------------------------
def test_worker_runs_in_a_temp_dir_with_a_scrubbed_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "secret-wandb-key")
    monkeypatch.setenv("HF_TOKEN", "secret-hf-token")
    probe = tmp_path / "probe.json"
    prelude = (
        "import json\nimport os\n"
        f"with open({str(probe)!r}, 'w') as f:\n"
        "    json.dump({'cwd': os.getcwd(), 'home': os.environ.get('HOME'), 'env': dict(os.environ)}, f)\n"
    )
    record = _measure(_forward("pass", prelude=prelude))
    assert record.status == "ok"
    seen = json.loads(probe.read_text())
    assert "WANDB_API_KEY" not in seen["env"] and "HF_TOKEN" not in seen["env"]
    assert not any("secret" in v for v in seen["env"].values())
    assert Path(seen["cwd"]).parent.name.startswith("warpk-worker-")  # <home>/job-N
    assert seen["home"] == str(Path(seen["cwd"]).parent)
    assert not Path(seen["home"]).exists(), "the worker's temp dir is removed afterwards"


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
    """Softmax 4096 x 16384 fp32: no FLOPs counted, input + output = 536,870,912 B at 4800 GB/s
    = 0.11185 ms; a 20 us cache hit is 5.6x faster than physically possible."""
    h200 = _hardware("h200")
    floor_ms = roofline_floor_ms(0.0, 2 * 4096 * 16384 * 4, h200)
    assert floor_ms == pytest.approx(536870912 / 4800e9 * 1e3, rel=1e-12)
    assert floor_ms == pytest.approx(0.111848, rel=1e-5)
    assert "(5.6x faster than physically possible)" in implausible_reason(0.02, floor_ms, h200)


def test_roofline_does_not_judge_the_cpu_profile():
    """The cpu profile's figures are nominal and its timings warm-cache: never implausible."""
    cpu = _hardware("cpu")
    floor_ms = roofline_floor_ms(2 * 256 * 512 * 256, 3 * 256 * 512 * 4, cpu)
    assert floor_ms > 0
    assert implausible_reason(floor_ms / 1000, floor_ms, cpu) is None


@pytest.mark.gpu
def test_a_timer_lie_on_the_gpu_is_implausible():
    """Static checks skipped: the candidate makes torch.cuda.Event.elapsed_time return 1 us. The
    softmax is right, so only the roofline floor of the h200 profile (2 x 256 MiB / 4.8 TB/s =
    0.112 ms at the GPU shape) stands between this and a 100x reward."""
    source = _forward("pass", prelude="torch.cuda.Event.elapsed_time = lambda self, end: 0.001\n")
    protocol = EvaluateConfig(
        result_cache=False, timing_trials=3, warmup_calls=1, run_timeout_s=120.0, gpus=[0]
    )
    evaluator = Evaluator(protocol, _hardware("h200"))
    record = evaluator.measure(EvalItem(load_task_file(SOFTMAX), source, "timer_lie.py"))
    assert record.status == "implausible"
    assert "below the roofline floor" in record.error and record.runtime_ms == pytest.approx(0.001)
