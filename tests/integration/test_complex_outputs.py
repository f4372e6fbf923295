"""A task whose output is complex and a lazy conjugate view, end to end on the CPU (red team round
54 left it unmeasured): a copy is `ok`, the unconjugated answer `incorrect`, and nothing stops the
run (the reference's own output, run in the trusted worker, made the comparison raise: exit 2)."""

import json

from tests.conftest import run_warpk
from tests.unit.test_sandbox import needs_bwrap

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).conj()


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
'''


@needs_bwrap
def test_a_lazy_conjugate_output_is_judged_by_its_values(tmp_path):
    task = tmp_path / "conj_fft.py"
    task.write_text(TASK)
    copy = tmp_path / "copy.py"
    copy.write_text(TASK.replace("class Model(", "class ModelNew("))
    wrong = tmp_path / "unconjugated.py"
    wrong.write_text(copy.read_text().replace("torch.fft.fft(x).conj()", "torch.fft.fft(x)"))
    result = run_warpk(f"hydra.run.dir={tmp_path / 'run'}", "logger=disabled", "evaluate.timing_batches=3",
                       "evaluate.result_cache=false", f"evaluate.task_file={task}",
                       f"evaluate.candidate_files=[{copy},{wrong}]")
    assert result.returncode == 0, result.stderr[-2000:]
    records = {r["candidate"]: r for r in map(json.loads, (tmp_path / "run" / "records.jsonl").open())}
    assert records["copy.py"]["status"] == "ok", records["copy.py"]["error"]
    assert records["unconjugated.py"]["status"] == "incorrect"
    assert "differs" in records["unconjugated.py"]["error"]
