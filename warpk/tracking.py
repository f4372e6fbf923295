"""Weights & Biases: one run per job, opened once, finished in `finally`; and a reader of offline runs.

Everything W&B writes goes under the job's run dir (WANDB_DIR and its cache/config/data/artifact
dirs are pointed there unless the user set them), so a run dir is self-contained. Jobs of one
multirun share a W&B `group`; tags come from the config group choices (e.g. `model:m3`).

`read_offline_run(dir)` parses the `.wandb` file of an offline run with wandb's own protobuf, with
no network: tests and reports read back what was logged.

Non-goals: no metric computation; stages hand in plain dicts.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from warpk.config import ConfigError, LoggerConfig

_WANDB_DIRS = ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR")


def require_wandb(logger: LoggerConfig) -> None:
    """Refuse (preflight) a logger that needs wandb where wandb is not installed."""
    if logger.mode != "disabled" and importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            f"logger.mode={logger.mode} needs the wandb package, which is not installed here: "
            "pip install wandb, or run with logger=disabled"
        )


@contextmanager
def wandb_run(
    logger: LoggerConfig, run_dir: Path, config: dict, tags: list[str], group: str | None, name: str | None
) -> Iterator[object]:
    """A W&B run for the block (a no-op run when logger.mode is disabled); always finished."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if logger.mode == "disabled":  # no wandb import at all: works where wandb is not installed
        yield _NoRun()
        return
    os.environ["WANDB_DIR"] = str(run_dir)
    for var in _WANDB_DIRS:
        os.environ.setdefault(var, str(run_dir / "wandb" / ".state" / var.lower()))
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    run = wandb.init(
        project=logger.project,
        entity=logger.entity,
        mode=logger.mode,
        dir=str(run_dir),
        config=config,
        tags=sorted(set(tags) | set(logger.tags)),
        group=group,
        name=name,
        reinit="finish_previous",
    )
    try:
        yield run
    finally:
        run.finish()


class _NoRun:
    """What `logger=disabled` logs to: nothing."""

    def __init__(self) -> None:
        self.summary: dict = {}

    def log(self, row: dict) -> None:
        pass


# --- reading an offline run back ------------------------------------------------------------
# The .wandb file uses LevelDB's log framing: 32 KiB blocks of chunks, each chunk with a 7-byte
# header (crc32, length, type); a record may span chunks (FIRST, MIDDLE..., LAST).
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _records(path: Path) -> Iterator[object]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    magic, version, _ = struct.unpack("<4sHB", data[:7])
    if magic != b":W&B" or version != 0xBEE1:
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        room = _BLOCK - pos % _BLOCK
        if room < 7:  # block trailer too small for a header: skip to the next block
            pos += room
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # zero padding to the block end
            pos += room
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        if len(chunk) < length:
            break  # truncated tail of a run that did not finish
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            raise ValueError(f"{path}: checksum mismatch at byte {pos}")
        pos += 7 + length
        if kind == _FIRST:
            pending = chunk
            continue
        if kind == _MIDDLE:
            pending += chunk
            continue
        payload = chunk if kind == _FULL else pending + chunk
        pending = b""
        record = pb.Record()
        record.ParseFromString(payload)
        yield record


def _items(items) -> dict:
    return {("/".join(i.nested_key) if i.nested_key else i.key): json.loads(i.value_json) for i in items}


def read_offline_run(run_dir: str | Path) -> dict:
    """Config, history rows, summary, tags and exit code of one offline run dir.

    Args:
        run_dir: an `offline-run-*` folder, or any folder containing exactly one of them.
    """
    run_dir = Path(run_dir)
    files = sorted(glob.glob(str(run_dir / "run-*.wandb"))) or sorted(
        glob.glob(str(run_dir / "**" / "offline-run-*" / "run-*.wandb"), recursive=True)
    )
    if len(files) != 1:
        raise FileNotFoundError(f"expected one offline W&B run under {run_dir}, found {len(files)}")
    out: dict = {"config": {}, "history": [], "summary": {}, "tags": [], "group": None, "exit_code": None}
    for record in _records(Path(files[0])):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["tags"] = list(record.run.tags)
            out["group"] = record.run.run_group or None
            out["config"].update(_items(record.run.config.update))
        elif kind == "config":
            out["config"].update(_items(record.config.update))
        elif kind == "history":
            out["history"].append(_items(record.history.item))
        elif kind == "summary":
            out["summary"].update(_items(record.summary.update))
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    return out
