"""The recorded-trace file format shared by `record`, the replay backend and warpk's ReplayMeter.

A trace is JSON lines (gzip-compressed when the name ends in `.gz`), one object per reading of
one GPU, in time order:

    {"timestamp_s": 12.345, "gpu": 0, "power_w": 97.1, "energy_j": 81234.567, "sm_clock_mhz": 1980}

- `timestamp_s` (required): seconds on any monotonic clock; only differences matter.
- `gpu` (required): the NVML device index.
- any name of METRICS below, in the unit its name says; a metric that was not supported or not
  read is left out (never written as 0 or null-as-0).
- `errors` (optional): [{"metric": "energy_j", "code": 15, "message": "GPU is lost"}], as the
  daemon reports NVML errors; the replay backend streams them back.

Non-goals: no schema versioning beyond "unknown keys are ignored"; no compression other than gzip.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path
from typing import IO

# Sample fields of sampler.proto that carry a measurement, in proto order.
METRICS = (
    "power_w",
    "power_instant_w",
    "energy_j",
    "gpu_util_pct",
    "mem_util_pct",
    "temperature_c",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "power_limit_w",
    "memory_used_bytes",
    "pcie_tx_kb_s",
    "pcie_rx_kb_s",
    "throttle_reasons",
    "fan_speed_pct",
)


class TraceFormatError(ValueError):
    """A trace line is not what the format above says; the message names the file and line."""


def open_text(path: str | Path, mode: str = "r") -> IO[str]:
    """Open a trace for text reading or writing, through gzip when the name ends in `.gz`."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def read_rows(path: str | Path) -> list[dict]:
    """All readings of a trace file, checked for the two required keys and time order per GPU."""
    rows, last_t = [], {}
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                t, gpu = float(row["timestamp_s"]), int(row["gpu"])
            except (ValueError, KeyError, TypeError) as e:
                raise TraceFormatError(f"{path}:{lineno}: {e!r}; need timestamp_s and gpu") from e
            if t < last_t.get(gpu, float("-inf")):
                raise TraceFormatError(f"{path}:{lineno}: timestamp_s goes backwards for gpu {gpu}")
            last_t[gpu] = t
            rows.append(row)
    if not rows:
        raise TraceFormatError(f"{path}: no readings")
    return rows


def row_from_reading(timestamp_s: float, gpu: int, values: dict, errors: list) -> dict:
    """One trace line from a backend reading (`errors` as (metric, code, message) tuples)."""
    row = {"timestamp_s": timestamp_s, "gpu": gpu}
    row.update((k, values[k]) for k in METRICS if values.get(k) is not None)
    if errors:
        row["errors"] = [{"metric": m, "code": c, "message": msg} for m, c, msg in errors]
    return row


def record(backend, gpus: list[int], interval_s: float, duration_s: float, path: str | Path,
           stop: threading.Event | None = None) -> int:
    """Read every metric of `gpus` from `backend` every `interval_s` into a trace file.

    Args:
        backend: a sampler backend (see sampler.backends).
        gpus: device indices to read.
        interval_s: seconds between ticks (deadline pacing: no drift).
        duration_s: seconds to record.
        path: trace file to write (.jsonl or .jsonl.gz).
        stop: set it to end the recording early.

    Returns:
        The number of lines written.
    """
    stop = stop or threading.Event()
    metrics = frozenset(METRICS)
    lines = 0
    start = next_t = time.monotonic()
    with open_text(path, "w") as f:
        while not stop.is_set() and time.monotonic() - start < duration_s:
            for gpu in gpus:
                values, errors = backend.read(gpu, metrics)
                f.write(json.dumps(row_from_reading(time.monotonic(), gpu, values, errors)) + "\n")
                lines += 1
            next_t += interval_s
            stop.wait(max(0.0, next_t - time.monotonic()))
    return lines
