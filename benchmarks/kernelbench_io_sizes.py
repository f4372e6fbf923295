"""Bytes of one call's inputs and outputs for every upstream KernelBench problem, from shapes alone.

Each problem's module runs under `torch.device("meta")`: its model, `get_inputs()` and one
forward make tensors that have shapes and dtypes but no storage, so even the 8 GiB problems
size in milliseconds on a CPU. Together with a refcheck record's `calls_per_batch` this says
which path a timed batch took (warpk.evaluator.link.Link.carrier_for: device memory on a GPU once
max(inputs, outputs) x calls reaches DEVICE_MEMORY_BYTES, else host memfds).

    python benchmarks/kernelbench_io_sizes.py --root KernelBench/KernelBench \
        --out docs/data/kernelbench-io-sizes.json

Writes {task_id: [input_bytes, output_bytes]} or {task_id: "why it could not be sized"} (ops
without a meta kernel). A fact about the problems' shapes: nothing here is timed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import warnings
from pathlib import Path


def tensor_bytes(value) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def sizes_of(path: Path) -> list[int] | str:
    import torch

    spec = importlib.util.spec_from_file_location(f"kb_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec.loader.exec_module(module)
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            outputs = model(*inputs)
    except Exception as err:  # noqa: BLE001 - a problem that cannot run on meta tensors is named
        return " ".join(f"{type(err).__name__}: {err}".split())[:160]
    return [tensor_bytes(inputs), tensor_bytes(outputs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="upstream KernelBench/KernelBench")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    found = {}
    for level in args.levels:
        folder = args.root / f"level{level}"
        if not folder.is_dir():
            raise SystemExit(f"{folder} is not a folder: --root names KernelBench's KernelBench/ folder")
        for path in sorted(folder.glob("*.py"), key=lambda p: (int(p.stem.split("_")[0]), p.stem)):
            found[f"kernelbench/L{level}/{path.stem}"] = sizes_of(path)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in found.items())
    args.out.write_text("{\n" + lines + "\n}\n")  # one problem a line
    sized = sum(isinstance(v, list) for v in found.values())
    print(f"{sized} of {len(found)} problems sized; {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
