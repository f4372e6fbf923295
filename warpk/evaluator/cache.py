"""The result cache: one record per (task, shape, candidate, hardware, protocol, software) key.

Records are JSON files under <cache_dir>/results/, written atomically. A hit comes back marked
`cached`. Only verdicts that depend on the candidate alone are stored: a timeout or a crash may
be the machine's fault and is measured again next time.

Non-goals: no build cache (load_inline's own, one folder per source hash under the same dir).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from warpk.paths import default_cache_dir  # noqa: F401 - warpk.evaluator's export
from warpk.records import EvalRecord

PROTOCOL_VERSION = 8  # bump whenever a change in the protocol changes what a record means
CACHEABLE = ("ok", "static_reject", "compile_error", "runtime_error", "incorrect", "implausible")
# Settings that change where or how fast things run, not what a record says.
NOT_IN_KEY = ("task_file", "candidate_files", "candidates_dir", "cache_dir", "result_cache",
              "compile_workers", "gpus", "sampler_addr")


def _software() -> str:
    try:
        return f"torch {version('torch')}"
    except PackageNotFoundError:
        return "torch unknown"


def result_key(task_source: str, shape: str, shapes: dict, candidate_sha: str, hardware, protocol,
               seed: int) -> str:
    key = {
        "v": PROTOCOL_VERSION,
        "task": task_source,
        "shape": shape,
        "shapes": shapes,
        "candidate": candidate_sha,
        "hardware": dataclasses.asdict(hardware),
        "seed": seed,
        "protocol": {k: v for k, v in dataclasses.asdict(protocol).items() if k not in NOT_IN_KEY},
        "software": _software(),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


class ResultCache:
    def __init__(self, root: Path, enabled: bool):
        self.root, self.enabled = root / "results", enabled

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, candidate: str, task_id: str) -> EvalRecord | None:
        path = self._path(key)
        if not self.enabled or not path.exists():
            return None
        try:
            record = EvalRecord.from_json(path.read_text())
        except (OSError, ValueError, TypeError):  # torn, or written by another version's records: a miss
            return None
        return dataclasses.replace(record, candidate=candidate, task_id=task_id, cached=True)

    def put(self, key: str, record: EvalRecord) -> None:
        if not self.enabled or record.status not in CACHEABLE:
            return
        if (record.error or "").startswith("evaluation failed"):  # our harness failed, not the candidate
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(record.to_json())
        tmp.replace(path)
