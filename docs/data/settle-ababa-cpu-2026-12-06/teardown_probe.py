"""How long a killed sandbox with N empty files in its tmpfs keeps processes in its cgroup, and what
that costs a busy loop on the lane's core (core 1). python teardown_probe.py 1000000 (root, bwrap,
cgroup v1 or v2 as warpk.evaluator.resources finds them)."""
import os, subprocess, sys, time, signal
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from warpk.evaluator.resources import ResourceGroup
N = int(sys.argv[1]); core = 1
code = f"""
import os
os.makedirs('/tmp/f', exist_ok=True)
for i in range({N}): os.close(os.open(f'/tmp/f/{{i}}', os.O_CREAT|os.O_WRONLY, 0o600))
print('ready', flush=True)
import time; time.sleep(100)
"""
g = ResourceGroup(4 << 30, cores=(core,))
cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
       "--unshare-all", "--die-with-parent", sys.executable, "-c", code]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, start_new_session=True, preexec_fn=g.join)
p.stdout.readline()
mem = g.dirs["memory"]
usage = lambda: int((mem / "memory.usage_in_bytes").read_text())
procs = lambda: sum(len((d / "cgroup.procs").read_text().split()) for d in set(g.dirs.values()))
os.sched_setaffinity(0, {core})
def work(ms):
    end = time.perf_counter() + ms / 1e3; n = 0
    while time.perf_counter() < end: n += 1
    return n
base = sum(work(20) for _ in range(10)) / 10
print(f"before kill: usage {usage()/2**20:.0f} MiB procs {procs()}")
t0 = time.perf_counter()
os.killpg(p.pid, signal.SIGKILL); g.kill(); p.wait()
print(f"kill+wait {1e3*(time.perf_counter()-t0):.0f} ms")
for i in range(260):
    t = time.perf_counter() - t0
    u, n = usage(), procs()
    x = work(20) / base
    if i % 5 == 0 or n == 0 and i % 2 == 0: print(f"t={t:5.2f}s procs {n} usage {u/2**20:7.1f} MiB throughput {x:.2f}")
g.close()
