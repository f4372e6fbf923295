"""The host's file table (red team round 43, corpus 64): a sandbox that holds files without fds
(mapped, then closed) is killed by the parent's guard before the table fills, its record says why,
and the next candidate is untouched (warpk.evaluator.filetable)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator, filetable
from warpk.evaluator.freeze import live_view
from warpk.evaluator.resources import placement
from warpk.tasks import load_task_file


class Group:
    def __init__(self, memory: Path | None = None):
        self.killed, self.procs = 0, ()
        self.dirs = {"memory": memory} if memory is not None else {}

    def kill(self):
        self.killed += 1


class Proc:
    pid = 0

    def poll(self):
        return 0  # reaped: no killpg


class Worker:
    def __init__(self, held: int):
        self.held, self.group, self.proc, self.guard_verdict = held, Group(), Proc(), None


@pytest.fixture
def fakes(monkeypatch):
    workers = [Worker(300), Worker(50_000), Worker(400), Worker(20_000)]
    monkeypatch.setattr(filetable, "_watched", set(workers))
    monkeypatch.setattr(filetable, "sandbox_pids", lambda w: {w})
    monkeypatch.setattr(filetable, "files_held", lambda pids, *limits: next(iter(pids)).held)
    monkeypatch.setattr(filetable, "_warned", False)
    return workers


def test_past_the_trigger_every_holder_over_the_floor_is_killed(fakes, monkeypatch):
    monkeypatch.setattr(filetable, "files_in_use", lambda: (400_000, 1_000_000))
    filetable.check()
    assert [w.group.killed for w in fakes] == [0, 1, 0, 1]
    verdict = fakes[1].guard_verdict
    assert "more than 16384 open files" in verdict and "reached 400000 of 1000000 (fs.file-max" in verdict
    filetable.check()  # killed once: the next look passes over them
    assert [w.group.killed for w in fakes] == [0, 1, 0, 1]


def test_below_the_trigger_nothing_is_counted_or_killed(fakes, monkeypatch):
    monkeypatch.setattr(filetable, "files_in_use", lambda: (200_000, 1_000_000))
    monkeypatch.setattr(filetable, "files_held", lambda *args: pytest.fail("counted below the trigger"))
    filetable.check()
    assert all(w.guard_verdict is None and not w.group.killed for w in fakes)


def test_a_table_filled_by_others_kills_nobody_and_is_said_once(fakes, monkeypatch, capsys):
    fakes[1].held = fakes[3].held = filetable.FLOOR_FILES
    monkeypatch.setattr(filetable, "files_in_use", lambda: (900_000, 1_000_000))
    filetable.check()
    filetable.check()
    assert all(w.guard_verdict is None and not w.group.killed for w in fakes)
    assert capsys.readouterr().err.count("other processes are filling it") == 1


def test_no_word_of_others_while_a_sandbox_killed_here_is_freeing_its_files(fakes, monkeypatch, capsys):
    monkeypatch.setattr(filetable, "files_in_use", lambda: (400_000, 1_000_000))
    filetable.check()  # kills the two holders; the table stays full while they exit
    filetable.check()
    assert [w.group.killed for w in fakes] == [0, 1, 0, 1] and capsys.readouterr().err == ""


def _kernel_memory_group(tmp_path: Path, name: str, stat: str, kmem: int | None = None) -> Path:
    """A fake memory cgroup: v1 when `kmem` is given (memory.kmem.usage_in_bytes), else v2."""
    group = tmp_path / name
    group.mkdir()
    (group / "memory.stat").write_text(stat)
    if kmem is not None:
        (group / "memory.kmem.usage_in_bytes").write_text(f"{kmem}\n")
    return group


def test_a_sandbox_whose_kernel_memory_is_over_its_floor_is_killed_whatever_its_count(monkeypatch, tmp_path):
    """Round 47: churning chains of processes hide their files from every count by pid, not from
    the kernel memory their memory cgroup is charged (cgroup v1's kmem, v2's `kernel`, or v2's
    parts where older kernels lack it). Round 48: page tables are not files: an honest worker
    with a 4 GiB workspace has ~8 MiB of them (v2 names them; on v1 its processes' VmPTE comes
    off). Round 49: on v1, no more than its processes hold: 3.3 GiB of host libraries mapped in
    2 MiB folios need no page tables, and an allowance for them hid a chain's files. Round 50:
    its largest address space's tables, not a sum (`page_tables`). Round 51: tables the trusted
    side's reads made (charged to it, in the worker's VmPTE) over memory no rss counts earn none.
    Round 52: 2 MiB pages keep a 4 KiB table each aside: an honest huge-page workspace is `ok`."""
    floor, gib, tables = filetable.KERNEL_FLOOR_BYTES, 1 << 30, 8 << 20
    groups = {  # name: (memory.stat, v1 kmem or None for v2, VmPTE of its processes)
        "v1": ("rss 1000\nrss_huge 0\nmapped_file 0\n", floor + 10, 0),
        "v1-big-workspace": (f"rss {4 * gib}\nrss_huge 0\nmapped_file 0\n", floor + tables, tables),
        "v1-folio-ballast": (f"rss 0\nrss_huge 0\nmapped_file {int(3.3 * gib)}\n",
                             floor + 10 + (76 << 10), 76 << 10),
        "v1-read-made-tables": (f"rss {64 << 20}\nrss_huge 0\nmapped_file {gib}\n",
                                floor + 10 + int((64 << 20) * filetable.PAGE_TABLE_ALLOWANCE), tables),
        "v1-huge-pages": (f"rss {4 * gib}\nrss_huge {4 * gib}\nmapped_file 0\n", floor + (8 << 20), 8 << 20),
        "v2": (f"anon 1\nkernel {floor + 1}\nslab 0\npagetables 0\n", None, 0),
        "v2-big-workspace": (f"anon {4 * gib}\nkernel {floor + tables}\npagetables {tables}\n", None, tables),
        "v2-parts": (f"slab {floor}\npagetables {64 << 20}\nkernel_stack 1\n", None, 64 << 20),
    }
    workers = []
    for name, (stat, kmem, held) in groups.items():
        worker = Worker(300)  # every count by pid well under its floor
        worker.group, worker.tables = Group(_kernel_memory_group(tmp_path, name, stat, kmem)), held
        workers.append(worker)
    monkeypatch.setattr(filetable, "_watched", set(workers))
    monkeypatch.setattr(filetable, "sandbox_pids", lambda w: {w})
    monkeypatch.setattr(filetable, "page_tables", lambda pids: next(iter(pids)).tables)
    monkeypatch.setattr(filetable, "files_held", lambda pids, *limits: next(iter(pids)).held)
    monkeypatch.setattr(filetable, "files_in_use", lambda: (400_000, 1_000_000))
    filetable.check()
    assert [w.group.killed for w in workers] == [1, 0, 1, 1, 0, 1, 0, 1]
    assert f"more than {floor} bytes of kernel memory besides page tables (it held {floor + 1})" \
        in workers[5].guard_verdict


def _toucher(mib: int) -> subprocess.Popen:
    """A process that touched `mib` MiB, one byte a 4 KiB page, waiting on its stdin."""
    proc = subprocess.Popen([sys.executable, "-c", f"import sys; b = bytearray({mib} << 20); "
                             "b[::4096] = b'x' * len(b[::4096]); print(1, flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"1"
    return proc


def test_page_tables_are_the_largest_address_space_s_not_a_sum():
    """Round 50: vfork children sharing one address space each report its page tables; a sum
    over them credited 12 MiB for 0.5 MiB. The largest one's only: never more than is charged."""
    big, small = _toucher(256), _toucher(16)
    try:
        most = filetable.page_tables({big.pid})
        assert most >= (256 << 20) // 512  # 8 bytes a 4 KiB page
        assert filetable.page_tables({big.pid, small.pid}) == most  # not the sum
        assert filetable.page_tables({big.pid, 1 << 30}) == most  # a pid gone
    finally:
        for proc in (big, small):
            proc.kill()
            proc.wait()


def test_kernel_memory_reads_zero_where_no_memory_cgroup_accounts_it(tmp_path):
    assert filetable.kernel_bytes(Worker(0)) == 0
    broken = Worker(0)
    broken.group = Group(_kernel_memory_group(tmp_path, "v2", "not a stat file"))
    assert filetable.kernel_bytes(broken) == 0


# mapped, then closed: open files with no fd (Python's own mmap keeps a dup of the fd)
MAP_FILES = """libc = ct.CDLL(None)
libc.mmap.restype = ct.c_void_p
libc.mmap.argtypes = [ct.c_void_p, ct.c_size_t, ct.c_int, ct.c_int, ct.c_int, ct.c_long]
for _ in range(HOLD):
    fd = os.open(sys.executable, os.O_RDONLY)
    libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    os.close(fd)
"""
HOARDER = """
import os, sys, time
import torch
import torch.nn as nn

ct = sys.modules["ctypes"]  # torch imported it; the pre-filter refuses the import by name
""" + MAP_FILES + """time.sleep(60)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""


def test_files_held_counts_the_fd_table_of_a_thread_of_its_own():
    script = ("import ctypes, os, sys, threading\n"
              "def hold():\n    assert ctypes.CDLL(None).unshare(0x400) == 0  # CLONE_FILES\n"
              "    held = [os.open(sys.executable, os.O_RDONLY) for _ in range(800)]\n"
              "    print('ready', flush=True)\n    threading.Event().wait()\n"
              "threading.Thread(target=hold, daemon=True).start()\nsys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n", "the thread did not get a table of its own"
        assert len(os.listdir(f"/proc/{child.pid}/fd")) < 100  # the process's own table hides them
        assert filetable.files_held({child.pid}) >= 800
    finally:
        child.kill()
        child.wait()


def test_files_held_counts_mappings_without_fds():
    script = "import ctypes as ct, os, sys\n" + MAP_FILES.replace("HOLD", "3000") + (
        "print('ready', flush=True)\nsys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n"
        assert filetable.files_held({child.pid}) >= 3000
    finally:
        child.kill()
        child.wait()


def _holder(script: str) -> subprocess.Popen:
    """A process running `script` (MAP_FILES and friends), once it printed 'ready'."""
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    if child.stdout.readline() != b"ready\n":
        child.kill()
        child.wait()
        pytest.fail("the holder did not get ready")
    return child


def test_an_exited_main_thread_hides_neither_mappings_nor_memory():
    """Red team rounds 44-45: the main thread leaves (SYS_exit, itself only) while a thread holding
    every mapping runs on; the process's own maps read empty and its status has no VmRSS. A live
    thread's view shows them, but a chain of threads living microseconds each escapes any look
    (round 45), so such a process counts as over every limit."""
    script = ("import ctypes as ct, os, sys, threading\n"
              "def hold():\n" + "".join("    " + line + "\n" for line in MAP_FILES.replace(
                  "HOLD", "3000").splitlines()) +
              "    ballast = b'x' * (64 << 20)\n    print('ready', flush=True)\n    sys.stdin.read()\n"
              "    os._exit(0)\n"
              "threading.Thread(target=hold).start()\nct.CDLL(None).syscall(60, 0)  # SYS_exit\n")
    child = _holder(script)
    try:
        assert Path(f"/proc/{child.pid}/maps").read_bytes() == b""  # what the old count read
        assert filetable.files_held({child.pid}) >= filetable.HIDDEN  # over any floor (round 45)
        assert filetable.files_held({child.pid}, limit=10**6) == 10**6 + 1
        assert b"VmRSS:" not in Path(f"/proc/{child.pid}/status").read_bytes()
        rss_kb = int(live_view(child.pid, "status", b"VmRSS:").split(b"VmRSS:")[1].split()[0])
        assert rss_kb > 64 << 10
    finally:
        child.kill()
        child.wait()


def test_a_count_slowed_by_deep_paths_stops_at_its_budget_as_over_the_limit(tmp_path):
    """Red team round 44: each line of maps spells the file's path, which the candidate makes as
    deep as it likes (40,000 folders: 3.2 ms a line, 31.6 s for one count)."""
    script = ("import ctypes as ct, mmap, os, sys\n"
              f"fd = os.open({str(tmp_path)!r}, os.O_RDONLY)\n"
              "for _ in range(300):\n    os.mkdir('a' * 200, dir_fd=fd)\n"
              "    fd = os.open('a' * 200, os.O_RDONLY, dir_fd=fd)\n"
              "file = os.open('f', os.O_RDWR | os.O_CREAT, dir_fd=fd)\nos.write(file, bytes(4096))\n"
              "libc = ct.CDLL(None)\nlibc.mmap.restype = ct.c_void_p\n"
              "libc.mmap.argtypes = [ct.c_void_p, ct.c_size_t, ct.c_int, ct.c_int, ct.c_int, ct.c_long]\n"
              "for _ in range(3000):\n    libc.mmap(None, 4096, 1, 1, file, 0)\n"
              "print('ready', flush=True)\nsys.stdin.read()\n")
    child = _holder(script)
    try:
        started = time.monotonic()
        full = filetable.files_held({child.pid})
        took_s = time.monotonic() - started
        assert full >= 3000
        assert filetable.files_held({child.pid}, limit=10**6, budget_s=took_s / 20) == 10**6 + 1
        assert filetable.files_held({child.pid}, limit=1000) == 1001  # past the limit: over
    finally:
        child.kill()
        child.wait()
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_sandbox_filling_the_table_is_crashed_with_the_reason_and_the_next_is_ok(monkeypatch):
    """At the real scale the trigger is a quarter of fs.file-max (617k files here); the test moves
    it to 12k files above what the host holds now, so the hoarder's 30k cross it in a second."""
    allocated, maximum = filetable.files_in_use()
    monkeypatch.setattr(filetable, "TRIGGER_SHARE", (allocated + 12_000) / maximum)
    monkeypatch.setattr(filetable, "FLOOR_FILES", 10_000)
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    cpu = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    task = load_task_file(REPO / "kernelbench" / "problems" / "01_softmax.py")
    honest = (REPO / "kernelbench" / "solutions" / "01_softmax" / "torch_fused.py").read_text()
    settings = EvaluateConfig(result_cache=False, sandbox="bwrap", timing_batches=3, batch_target_ms=5.0,
                              run_timeout_s=120.0, compile_timeout_s=120.0)
    evaluator = Evaluator(settings, cpu, lanes=[""])
    try:
        items = [EvalItem(task, HOARDER.replace("HOLD", "30_000"), "hoard.py"),
                 EvalItem(task, honest, "torch_fused.py")]
        hoarder, after = evaluator.evaluate_many(items)
    finally:
        evaluator.close()
    assert hoarder.status == "crashed", (hoarder.status, hoarder.error)
    assert "open files" in hoarder.error and "fs.file-max" in hoarder.error
    assert hoarder.wall_s < 60, "killed by the guard, not by the timeout"
    assert after.status == "ok", after.error


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.skipif("memory" not in placement()[1], reason="needs a memory cgroup for the sandboxes")
@pytest.mark.parametrize("chain", [
    "['forkchain', '30000', '15', '0', '0', '16', '1', '0', '500']",  # 16 folders deep, 500 a generation
    "['vforkkill', '30000', '15', '0', '2', '0', '1', '800']",  # 800 zombies
], ids=["fork_chain_deep_paths", "vfork_chain_behind_zombies"])
def test_a_chain_that_outruns_every_count_by_pid_is_crashed_by_its_kernel_memory(monkeypatch, chain):
    """Red team round 47 at a lowered trigger (as above): 30,000 files held for 15 s by a chain of
    forked processes each exiting as its child goes on (paths 16 folders deep), or of vfork
    children each killing its waiting parent behind 800 zombies; both were `ok` before the guard
    read the sandbox's kernel memory."""
    allocated, maximum = filetable.files_in_use()
    monkeypatch.setattr(filetable, "TRIGGER_SHARE", (allocated + 10_000) / maximum)
    monkeypatch.setattr(filetable, "FLOOR_FILES", 2_000)
    monkeypatch.setattr(filetable, "KERNEL_FLOOR_BYTES", 8 << 20)
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    cpu = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    task = load_task_file(REPO / "kernelbench" / "problems" / "03_gelu_tanh.py")
    honest = (REPO / "kernelbench" / "solutions" / "03_gelu_tanh" / "torch_fused.py").read_text()
    source = (REPO / "tests" / "data" / "file_table" / "hoarder.py").read_text()
    default = "ARGS = ['forkchain', '30000', '15', '0', '0', '16', '1', '0', '500']  # the fork chain"
    assert default in source
    source = source.replace(default, f"ARGS = {chain}")
    settings = EvaluateConfig(result_cache=False, sandbox="bwrap", timing_batches=3, batch_target_ms=5.0,
                              run_timeout_s=120.0, compile_timeout_s=120.0)
    evaluator = Evaluator(settings, cpu, lanes=[""])
    try:
        hoarder, after = evaluator.evaluate_many([EvalItem(task, source, "hoarder.py"),
                                                  EvalItem(task, honest, "torch_fused.py")])
    finally:
        evaluator.close()
    assert hoarder.status == "crashed", (hoarder.status, hoarder.error)
    assert "bytes of kernel memory" in hoarder.error and "fs.file-max" in hoarder.error
    assert after.status == "ok", after.error


WORKSPACE = """import time
import torch
import torch.nn as nn
import torch.nn.functional as F

_WORKSPACE = torch.ones((2 << 30) // 4)  # 2 GiB touched at import: a table, a cache, a workspace
time.sleep(4)  # the guard looks meanwhile


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x, approximate="tanh")
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
@pytest.mark.skipif("memory" not in placement()[1], reason="needs a memory cgroup for the sandboxes")
def test_an_honest_worker_with_a_big_workspace_is_not_killed_for_its_page_tables(monkeypatch):
    """Red team round 48: 2 GiB touched costs ~4 MiB of page tables, kernel memory charged to its
    cgroup; with the table past the trigger (here always) and the kernel floor at 4 MiB it was
    `crashed`. Page tables are not files: it is `ok`."""
    monkeypatch.setattr(filetable, "TRIGGER_SHARE", 0.0)
    monkeypatch.setattr(filetable, "KERNEL_FLOOR_BYTES", 4 << 20)
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    cpu = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    task = load_task_file(REPO / "kernelbench" / "problems" / "03_gelu_tanh.py")
    settings = EvaluateConfig(result_cache=False, sandbox="bwrap", timing_batches=3, batch_target_ms=5.0,
                              run_timeout_s=120.0, compile_timeout_s=120.0, memory_limit_gb=4.0)
    looked: list[int] = []
    kernel_bytes = filetable.kernel_bytes
    monkeypatch.setattr(filetable, "kernel_bytes", lambda *a: looked.append(kernel_bytes(*a)) or looked[-1])
    with Evaluator(settings, cpu, lanes=[""]) as evaluator:
        (record,) = evaluator.evaluate_many([EvalItem(task, WORKSPACE, "workspace.py")])
    assert record.status == "ok", record.error
    assert looked and max(looked) < 4 << 20
