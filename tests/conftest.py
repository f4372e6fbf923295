"""Test environment: CPU, offline, one thread; W&B, HF and inductor state in a temp dir.

Set before anything imports torch, transformers or wandb (FACTS.md: with 2 cores and another
busy process, torch steps ran up to 100x slower without OMP_NUM_THREADS=1).
"""

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_STATE = tempfile.mkdtemp(prefix="warpk-tests-")
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)  # ~17 MB a process: 8 GB after 470 runs
os.environ.update(
    OMP_NUM_THREADS="1",
    HF_HUB_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    WANDB_SILENT="true",
    HF_HOME=os.path.join(_STATE, "hf"),
    TORCHINDUCTOR_CACHE_DIR=os.path.join(_STATE, "inductor"),
)
for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
    os.environ[var] = os.path.join(_STATE, var.lower())
os.environ.pop("WANDB_API_KEY", None)
os.environ["WARPK_CACHE_DIR"] = os.path.join(_STATE, "warpk-cache")  # builds and results

# the cores before `_own_cores` (kept in the environment: pytest's conftest and `tests.conftest`
# may be two imports of this file, the second after the split)
os.environ.setdefault("WARPK_TEST_MACHINE_CORES", ",".join(map(str, sorted(os.sched_getaffinity(0)))))
MACHINE_CORES = frozenset(int(c) for c in os.environ["WARPK_TEST_MACHINE_CORES"].split(","))


def _own_cores() -> None:
    """Under pytest-xdist, each worker on its own share of the machine's cores (its children
    inherit it). The lane lock (warpk.evaluator.lane_lock) lets one measurement at a time onto a
    core, so two workers whose lanes both took the last core measured in turn. On a core of its
    own, a worker's lanes neither wait for the other's nor are disturbed by its imports and training.
    Tests of placement over several cores take them back (`all_cores`).
    On by default (WARPK_TEST_OWN_CORES=0 turns it off): 1015 against 1198 s on the 2-core VM.
    The honest workers it saw `crashed` ("outputs cannot be read ... No such process") were the
    trusted side taking a child the worker forked at import for the worker (remote.worker_pid,
    fixed 2026-12-07): a busy core held that child between its fork and its exec."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    cores = sorted(MACHINE_CORES)
    if os.environ.get("WARPK_TEST_OWN_CORES", "1") != "1":
        return
    if not (worker and count and worker.startswith("gw") and int(count) > 1 and len(cores) > 1):
        return
    if len(os.sched_getaffinity(0)) == len(cores):  # not split yet
        index, count = int(worker[2:]), int(count)
        share = cores[index::count] if count <= len(cores) else [cores[index % len(cores)]]
        try:
            os.sched_setaffinity(0, share)
        except OSError:  # a container that refuses it: the workers share the cores, as before
            pass


_own_cores()


REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


@functools.cache
def hardware_profile(name: str):
    """conf/hardware/<name>.yaml as a run gets it: composed by Hydra, typed (HardwareConfig)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from warpk.config import register_configs

    register_configs()  # the typed schema conf/config.yaml composes on
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3", job_name="warpk"):
        return OmegaConf.to_object(compose("config", overrides=[f"hardware={name}"])).hardware


def run_warpk(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m warpk ARGS` from the repo root, as a user would type it."""
    return subprocess.run(
        [sys.executable, "-m", "warpk", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def all_cores():
    """The machine's cores back for one test of placement over several cores (`_own_cores` gave
    this xdist worker a share of them); its own share again afterwards. Returns them, sorted."""
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, MACHINE_CORES)
    yield sorted(MACHINE_CORES)
    os.sched_setaffinity(0, own)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def pytest_collection_modifyitems(config, items):
    """Skip `gpu` tests when NVML finds no NVIDIA GPU; `slurm` tests are decided by `slurm_cluster`."""
    from warpk.hardware import detect_gpu_names

    needs_gpu = [i for i in items if i.get_closest_marker("gpu")]
    if needs_gpu and not detect_gpu_names():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU: NVML reports none on this machine")
        for item in needs_gpu:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    """WARPK_INSTAFAIL=1: a failure's traceback printed as it happens, not only at the end (a
    device call cut off by its time limit brings back no summary: 2026-12-06, three GPU failures
    with no reason)."""
    if os.environ.get("WARPK_INSTAFAIL") and report.failed:
        print(f"\nFAILED {report.nodeid} ({report.when}):\n{report.longreprtext[-4000:]}", file=sys.stderr,
              flush=True)


SLURM_SCRIPT = REPO / "scripts" / "slurm_local.sh"


def _slurm_controller_up() -> bool:
    import shutil

    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    return ping.returncode == 0 and "UP" in ping.stdout


@pytest.fixture(scope="session")
def slurm_cluster():
    """A usable SLURM controller for the session, or a skip that says why there is none.

    As root with apt-get (CI, a workstation): `scripts/slurm_local.sh up` (idempotent: ~10 s from
    nothing, 0.1 s when it already runs); a cluster this fixture started is stopped at the end.
    Otherwise an already running controller is used (`sbatch` on PATH, `scontrol ping` UP), else skip.
    """
    import shutil

    was_up = _slurm_controller_up()
    started = False
    if os.geteuid() == 0 and (shutil.which("apt-get") or shutil.which("sbatch")):
        up = subprocess.run(["bash", str(SLURM_SCRIPT), "up"], capture_output=True, text=True, timeout=600)
        if up.returncode != 0:
            tail = " | ".join((up.stdout + up.stderr).strip().splitlines()[-5:])
            pytest.skip(f"needs a SLURM controller: scripts/slurm_local.sh up failed: {tail}")
        started = not was_up
    elif not was_up:
        pytest.skip(
            "needs a SLURM controller: none answers `scontrol ping`, and starting the local one "
            "(scripts/slurm_local.sh up) needs root and apt-get"
        )
    yield
    if started:
        subprocess.run(["bash", str(SLURM_SCRIPT), "down"], capture_output=True, timeout=120)


@pytest.fixture(autouse=True)
def _slurm_marked_tests_need_a_cluster(request):
    if request.node.get_closest_marker("slurm"):
        request.getfixturevalue("slurm_cluster")


@pytest.fixture
def private_budget(monkeypatch):
    """`set(limit_bytes)`: the sandboxes this test process makes from now on lie below a memory
    group of their own with that limit, standing in for the shared `warpk` budget group (which
    other tests' live workers also use, so it cannot be lowered below their usage). Skips where
    there is no memory cgroup."""
    from warpk.evaluator import resources

    method, bases = resources.placement()
    if method == "none" or "memory" not in bases:
        pytest.skip("no memory cgroup here")
    made = []

    def set_budget(limit_bytes: int) -> None:
        group = bases["memory"] / f"test-budget-{os.getpid()}-{len(made)}"
        group.mkdir()
        made.append(group)
        if method == "cgroup2":
            (group / "memory.max").write_text(str(limit_bytes))
            controllers = (bases["memory"] / "cgroup.subtree_control").read_text().split()
            (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in controllers))
            monkeypatch.setattr(resources, "placement", lambda: (method, {c: group for c in bases}))
        else:
            (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
            monkeypatch.setattr(resources, "placement", lambda: (method, {**bases, "memory": group}))

    yield set_budget
    monkeypatch.undo()
    for group in made:
        for child in group.glob("sandbox-*"):
            try:
                child.rmdir()
            except OSError:
                pass
        try:
            group.rmdir()
        except OSError:
            pass


@pytest.fixture
def root_sandbox(monkeypatch):
    """Sandboxes made in this test keep the host's root as their uid, as where the evaluator is
    root and cannot drop them to nobody (warpk.evaluator.identity): the defences that case still
    needs are tested in it. Skips where this process is not the host's root."""
    from warpk.evaluator import identity

    if not identity.host_root():
        pytest.skip("needs the host's root")
    monkeypatch.setattr(identity, "drops", lambda: False)


def is_python(pid: int) -> bool:
    """Whether process `pid` runs Python (not bwrap, which a GPU machine's carried copy runs
    through ld.so, `/lib64/ld-linux...` in its command line, nor setpriv)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().startswith("python")
    except OSError:
        return False
