"""Does a second process with a live CUDA context slow a launch-bound model, and how much of it
does freezing that process stop? A probe for the reference-alone correction's copy bias.

In the evaluator each side's batches run while the other side's worker is alive and frozen
(docs/evaluator.md §2), and the reference is also timed "alone", after the candidate's sandbox is
gone. On 9 upstream problems (CNNs, single L1 ops, an LSTM) the interleaved reference was 1.1-1.8x
slower than alone, and the candidate's own batches as slow as the interleaved reference
(docs/benchmarks.md, session 23).
This times one model in this process under each condition, side by side, nothing else changed:

  alone        no other process has a CUDA context on this GPU
  idle peer    a peer process holds a CUDA context (one kernel run), blocked on a pipe
  stopped peer the same peer, SIGSTOPped (the evaluator uses cgroup.freeze; SIGSTOP is the
               closest thing without a cgroup)
  alone, gaps  no peer; between our batches this process sleeps as long as one batch takes
               (what the other side's turn costs us if idling alone is what matters)
  turns, peer idle  the peer is woken, answers a message without GPU work and is stopped again
               between our batches
  taking turns the peer runs the same model for one batch between each of ours and is
               SIGSTOPped while ours runs (the evaluator's interleaving)

    python benchmarks/probe_second_context.py --task KernelBench/KernelBench/level3/9_ResNet18.py
    python benchmarks/probe_second_context.py --device cpu --batches 3   # a smoke run, no GPU

Prints one line per condition (median ms a call, its 5-95% over batches, ratio to `alone`) and
writes probe.json with every batch when --out is given. A diagnostic: nothing here reaches a
record or a verdict.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import signal
import statistics
import sys
import time
from pathlib import Path

CONDITIONS = ("alone", "alone, gaps", "idle peer", "stopped peer", "turns, peer idle", "taking turns",
              "alone again")


def build(task: str | None, device: str):
    """(model, inputs) of a KernelBench file, or of a stack of small layers (launch-bound)."""
    import torch

    if task:
        spec = importlib.util.spec_from_file_location("probe_task", task)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.Model(*module.get_init_inputs()).to(device).eval()
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
        return model, inputs
    layers = []
    for _ in range(40):
        layers += [torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(device).eval(), [torch.randn(2, 16, 32, 32, device=device)]


def timed_batch(model, inputs, calls: int, device: str) -> float:
    """ms a call of `calls` forward calls, from the first launch to the device being done."""
    import torch

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    with torch.no_grad():
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            model(*inputs)
        sync()
    return (time.perf_counter() - start) * 1e3 / calls


def batches(model, inputs, args) -> list[float]:
    return [timed_batch(model, inputs, args.calls, args.device) for _ in range(args.batches)]


def peer(task: str | None, device: str, calls: int, conn) -> None:
    """A second process: its CUDA context made, then one batch per message until told to stop."""
    model, inputs = build(task, device)
    timed_batch(model, inputs, 1, device)
    conn.send("ready")
    while (message := conn.recv()) in ("run", "ping"):
        if message == "run":
            timed_batch(model, inputs, calls, device)
        conn.send("done")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", help="a KernelBench problem file (default: 40 small conv layers)")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--calls", type=int, default=7, help="forward calls a batch")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("probe_second_context: no CUDA device here (use --device cpu for a smoke run)")
        return 2
    model, inputs = build(args.task, args.device)
    for _ in range(3):
        timed_batch(model, inputs, args.calls, args.device)  # warm-up
    ctx = mp.get_context("spawn")  # a fresh interpreter: no CUDA state inherited
    results: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    results["alone"] = batches(model, inputs, args)
    gap_s = statistics.median(results["alone"]) * args.calls / 1e3
    for _ in range(args.batches):
        time.sleep(gap_s)
        results["alone, gaps"].append(timed_batch(model, inputs, args.calls, args.device))
    here, there = ctx.Pipe()
    proc = ctx.Process(target=peer, args=(args.task, args.device, args.calls, there), daemon=True)
    proc.start()
    try:
        if here.recv() != "ready":
            raise SystemExit("probe_second_context: the peer did not start")
        results["idle peer"] = batches(model, inputs, args)
        os.kill(proc.pid, signal.SIGSTOP)
        results["stopped peer"] = batches(model, inputs, args)
        for condition, message in (("turns, peer idle", "ping"), ("taking turns", "run")):
            for _ in range(args.batches):  # the peer's turn, then ours while it is stopped
                os.kill(proc.pid, signal.SIGCONT)
                here.send(message)
                here.recv()
                os.kill(proc.pid, signal.SIGSTOP)
                results[condition].append(timed_batch(model, inputs, args.calls, args.device))
        os.kill(proc.pid, signal.SIGCONT)
        here.send("stop")
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
    results["alone again"] = batches(model, inputs, args)
    alone = statistics.median(results["alone"])
    name = args.task or "40 small conv layers (2x16x32x32)"
    print(f"probe_second_context: {name} on {args.device}, {args.calls} calls a batch, "
          f"{args.batches} batches")
    for condition in CONDITIONS:
        times = sorted(results[condition])
        low, high = (times[round(q * (len(times) - 1))] for q in (0.05, 0.95))
        median = statistics.median(times)
        print(f"  {condition:16s} {median:8.3f} ms a call (5-95% {low:.3f}-{high:.3f})"
              f"  x{median / alone:.3f} of alone")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "probe.json").write_text(json.dumps({"task": name, "device": args.device,
                                                         "calls": args.calls, "ms_a_call": results}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
