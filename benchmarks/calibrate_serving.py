"""Measure what the serving simulator (warpk/runtime, issue #6) is calibrated on.

    python benchmarks/calibrate_serving.py --out $OUT                  # H200: Qwen2.5-7B architecture
    python benchmarks/calibrate_serving.py --out /tmp/cal --tiny --device cpu   # smoke test, no energy

A transformer of the Qwen2.5-7B architecture (bf16, random weights: the same arithmetic and memory
traffic as trained weights; nothing can be downloaded on the GPU machine) is run with Hugging Face
transformers (SDPA attention) at the card's own power limit and clocks; this script never changes
either. For each point it measures:

- prefill: one forward pass over `batch` prompts of `prompt_tokens` tokens (time to first token
  without queueing);
- decode: one step of `batch` sequences, each with a KV cache of `context_tokens` tokens (the
  cache is cropped back after every step, so every timed step sees the same context).

Time per call comes from the energy meter's windows (wall time of many calls between device-wide
synchronizes); energy per call and average power from aligned windows on the NVML energy counter
(warpk.telemetry.NvmlEnergyMeter, docs/energy.md), with their uncertainty. Idle power is observed
once before the points and reported separately; it is never subtracted.

Output: `--out/<name>.json` in the shape warpk/runtime reads (see `calibration_document`) and a
markdown table beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Qwen2.5-7B (and -Coder-7B) config.json numbers.
QWEN25_7B = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                 num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
                 rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=False)
TINY = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            tie_word_embeddings=True)

PREFILL_POINTS = [(1, t) for t in (128, 256, 512, 1024, 2048, 4096)] + [(4, 512), (8, 512), (16, 256)]
DECODE_POINTS = ([(b, 512) for b in (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)]
                 + [(b, 2048) for b in (1, 8, 32, 64)])


def build_model(arch: dict, device: str, dtype):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(**arch, attn_implementation="sdpa")
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(dtype)
    return model.eval()


class Timer:
    """Time per call without energy (CPU smoke test): wall time of calls between synchronizes."""

    source = "none"

    def __init__(self, min_window_s: float):
        self.min_window_s = min_window_s

    def measure(self, fn, sync) -> dict:
        fn()
        sync()
        calls, t0 = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            sync()
            elapsed = time.perf_counter() - t0
            if elapsed >= self.min_window_s:
                break
        return {"time_s": elapsed / calls, "energy_j": None, "energy_uncertainty_j": None,
                "energy_cv": None, "power_w": None, "window_s": elapsed, "calls_per_window": calls}


class Meter:
    """Energy per call on the NVML counter (aligned windows) and time per call from the same windows."""

    source = "nvml"

    def __init__(self, gpu: int, min_window_s: float, repeats: int):
        from warpk.telemetry import MeterSettings, NvmlEnergyMeter

        self.meter = NvmlEnergyMeter(gpu, MeterSettings(min_window_s=min_window_s, repeats=repeats,
                                                        warmup_s=0.3))

    def idle(self) -> tuple[float, float | None]:
        return self.meter.observe_idle(2.0)

    def measure(self, fn, sync) -> dict:
        m = self.meter.measure(fn, sync=sync)
        return {"time_s": m.time_per_call_ms / 1000.0, "energy_j": m.energy_j,
                "energy_uncertainty_j": m.energy_uncertainty_j, "energy_cv": m.energy_cv,
                "power_w": m.avg_power_w, "window_s": m.window_s, "calls_per_window": m.calls_per_window}


def prefill_fn(model, batch: int, tokens: int, vocab: int, device: str):
    import torch

    ids = torch.randint(0, vocab, (batch, tokens), device=device)

    def step():
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False, logits_to_keep=1)

    return step


def graphed(step):
    """`step` captured in a CUDA graph (what production servers do for decode): replaying it costs
    no Python or kernel-launch time, so small batches are timed as the GPU runs them."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def static_decode_fn(model, batch: int, context: int, vocab: int, device: str):
    """One decode step at position `context` of a static KV cache holding `context` tokens.

    The cache is exactly `context + 1` long, so the step's query attends to every slot and the
    step rewrites the same slot each time: every call sees the same context, and the step has
    fixed shapes (graph-capturable).
    """
    import torch
    from transformers import StaticCache

    try:
        cache = StaticCache(config=model.config, max_cache_len=context + 1)
    except TypeError:  # transformers 4.x
        cache = StaticCache(config=model.config, max_batch_size=batch, max_cache_len=context + 1,
                            device=device, dtype=model.dtype)
    prompt = torch.randint(0, vocab, (batch, context), device=device)
    with torch.inference_mode():
        for start in range(0, context, 512):
            chunk = prompt[:, start:start + 512]
            positions = torch.arange(start, start + chunk.shape[1], device=device)
            model(input_ids=chunk, past_key_values=cache, cache_position=positions,
                  position_ids=positions.expand(batch, -1), use_cache=True, logits_to_keep=1)
    token = torch.randint(0, vocab, (batch, 1), device=device)
    position = torch.tensor([context], device=device)

    def step():
        with torch.inference_mode():
            model(input_ids=token, past_key_values=cache, cache_position=position,
                  position_ids=position.expand(batch, 1), use_cache=True, logits_to_keep=1)
            rewind(cache, context)

    return step


def rewind(cache, length: int) -> None:
    """Set a static cache's fill level back to `length` (transformers 5 counts it on the device)."""
    for layer in getattr(cache, "layers", []):
        filled = getattr(layer, "cumulative_length", None)
        if hasattr(filled, "fill_"):
            filled.fill_(length)
        elif isinstance(filled, int):
            layer.cumulative_length = length


def decode_fn(model, batch: int, context: int, vocab: int, device: str):
    """One decode step over a KV cache of `context` tokens, cropped back after each step."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    prompt = torch.randint(0, vocab, (batch, context), device=device)
    with torch.inference_mode():
        # fill the cache in slices so a long batch x context prefill does not need its full activations
        for start in range(0, context, 512):
            chunk = prompt[:, start:start + 512]
            positions = torch.arange(start, start + chunk.shape[1], device=device).expand(batch, -1)
            model(input_ids=chunk, past_key_values=cache, position_ids=positions, use_cache=True,
                  logits_to_keep=1)
    token = torch.randint(0, vocab, (batch, 1), device=device)
    position = torch.full((batch, 1), context, device=device)

    def step():
        with torch.inference_mode():
            model(input_ids=token, past_key_values=cache, position_ids=position, use_cache=True,
                  logits_to_keep=1)
        cache.crop(-1)  # drop the token just appended: every step sees `context` cached tokens

    return step


def calibration_document(args, info: dict, idle_power_w, prefill: list, decode: list) -> dict:
    return {
        "gpu": info.get("gpu"),
        "model": ("tiny Qwen2 architecture (smoke test)" if args.tiny else
                  "Qwen2.5-7B architecture (28 layers, hidden 3584, 28 heads, 4 KV heads), random weights"),
        "dtype": args.dtype,
        "attention": "sdpa (transformers)",
        "mode": args.mode if args.device == "cuda" else "eager",
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/calibrate_serving.py " + " ".join(sys.argv[1:]),
        "energy_source": info["energy_source"],
        "method": ("time and energy per call from aligned NVML energy-counter windows of >= "
                   f"{args.window_s} s, {args.repeats} windows per point; idle power observed "
                   "separately and not subtracted; the card's own power limit and clocks"),
        "software": info.get("software"),
        "power_limit_w": info.get("power_limit_w"),
        "idle_power_w": idle_power_w,
        "prefill": prefill,
        "decode": decode,
    }


def markdown(doc: dict) -> str:
    lines = [f"# Serving calibration: {doc['model']} on {doc['gpu']} ({doc['date']})", "",
             f"`{doc['command']}`; energy: {doc['energy_source']}; idle power {doc['idle_power_w']} W", "",
             "| phase | batch | tokens | time (ms) | energy (J) | power (W) |", "|---|---|---|---|---|---|"]

    def fmt(x, spec):
        return "—" if x is None else format(x, spec)

    for row in doc["prefill"]:
        lines.append(f"| prefill | {row['batch']} | {row['prompt_tokens']} | {row['time_s'] * 1e3:.2f} | "
                     f"{fmt(row['energy_j'], '.3f')} | {fmt(row['power_w'], '.0f')} |")
    for row in doc["decode"]:
        lines.append(f"| decode step | {row['batch']} | ctx {row['context_tokens']} | "
                     f"{row['step_time_s'] * 1e3:.2f} | {fmt(row['energy_j_per_step'], '.3f')} | "
                     f"{fmt(row['power_w'], '.0f')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--name", default="h200_qwen2.5-7b", help="output file name, without extension")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--tiny", action="store_true", help="tiny architecture and few points (smoke test)")
    p.add_argument("--window-s", type=float, default=1.0, help="minimum energy window per repeat")
    p.add_argument("--repeats", type=int, default=2, help="energy windows per point")
    p.add_argument("--mode", default="graph", choices=["graph", "eager"],
                   help="graph: each call replays a CUDA graph (static KV cache for decode); eager: "
                        "plain transformers calls (Python and launch overhead included)")
    args = p.parse_args(argv)

    import torch

    dtype = getattr(torch, args.dtype)
    arch = TINY if args.tiny else QWEN25_7B
    prefill_points = PREFILL_POINTS[:2] if args.tiny else PREFILL_POINTS
    decode_points = DECODE_POINTS[:2] if args.tiny else DECODE_POINTS
    device = f"cuda:{args.gpu}" if args.device == "cuda" else "cpu"
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("calibrate_serving: no CUDA device here; use --device cpu --tiny for a smoke test")
            return 2
        torch.cuda.set_device(args.gpu)
        meter = Meter(args.gpu, args.window_s, args.repeats)
        sync = torch.cuda.synchronize
        info = {"gpu": torch.cuda.get_device_name(args.gpu), "energy_source": "nvml"}
        import pynvml

        handle = pynvml.nvmlDeviceGetHandleByIndex(args.gpu)
        info["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
        idle_power_w, period_s = meter.idle()
        info["software"] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                            "driver": str(pynvml.nvmlSystemGetDriverVersion()),
                            "counter_period_s": period_s}
    else:
        meter, sync, idle_power_w = Timer(args.window_s), (lambda: None), None
        info = {"gpu": f"cpu ({platform.processor() or platform.machine()})", "energy_source": "none",
                "software": {"torch": torch.__version__}}
    import transformers

    info["software"]["transformers"] = transformers.__version__

    t0 = time.monotonic()
    model = build_model(arch, device, dtype)
    print(f"model built in {time.monotonic() - t0:.1f} s; idle power {idle_power_w} W", flush=True)
    prefill, decode = [], []
    use_graphs = args.mode == "graph" and args.device == "cuda"

    def prepare(make_eager, make_static, *point):
        """The step to measure and how it runs; a point whose graph capture fails runs eager, labelled."""
        if not use_graphs:
            return make_eager(model, *point, arch["vocab_size"], device), "eager"
        try:
            return graphed(make_static(model, *point, arch["vocab_size"], device)), "cuda_graph"
        except Exception as err:  # noqa: BLE001 - recorded per point, never silent
            torch.cuda.synchronize()
            return (make_eager(model, *point, arch["vocab_size"], device),
                    f"eager (graph capture failed: {type(err).__name__}: {str(err)[:120]})")

    for batch, tokens in prefill_points:
        fn, mode = prepare(prefill_fn, prefill_fn, batch, tokens)
        m = meter.measure(fn, sync)
        prefill.append({"batch": batch, "prompt_tokens": tokens, "mode": mode, **m})
        print(f"prefill b={batch} t={tokens} [{mode}]: {m['time_s'] * 1e3:.2f} ms {m['energy_j']} J "
              f"{m['power_w']} W", flush=True)
    for batch, context in decode_points:
        fn, mode = prepare(decode_fn, static_decode_fn, batch, context)
        m = meter.measure(fn, sync)
        decode.append({"batch": batch, "context_tokens": context, "mode": mode,
                       "step_time_s": m.pop("time_s"), "energy_j_per_step": m.pop("energy_j"), **m})
        print(f"decode b={batch} ctx={context} [{mode}]: {decode[-1]['step_time_s'] * 1e3:.2f} ms "
              f"{decode[-1]['energy_j_per_step']} J {m['power_w']} W", flush=True)
        if args.device == "cuda":
            torch.cuda.empty_cache()
    doc = calibration_document(args, info, idle_power_w, prefill, decode)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / f"{args.name}.md").write_text(markdown(doc))
    print(markdown(doc))
    print(f"total {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
