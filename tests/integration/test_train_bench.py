"""benchmarks/bench_grpo.py end to end on the CPU (--tiny): random weights written to a hub-cache
layout, loaded by warpk.policy.load_policy, one GRPO step per generator, JSON + markdown out."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_bench_grpo_tiny_runs_the_real_loading_and_training_path(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "benchmarks/bench_grpo.py", "--tiny", "--out", str(out), "--work", str(tmp_path),
         "--generators", "hf", "hf-static", "hf-paged"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "RANDOM INITIALISATION" in result.stdout
    report = json.loads((out / "bench_grpo.json").read_text())
    # each generator (dynamic cache, static cache, continuous batching) sampled a whole group through trl
    assert [r["generator"] for r in report["results"]] == ["hf", "hf-static", "hf-paged"]
    for r in report["results"]:
        assert "error" not in r, r.get("error")
        assert r["size"] == "tiny" and r["steps"] == 1 and r["group_size"] == 8 and r["prompts"] == 1
        assert r["params"] > r["trainable_params"] > 0  # LoRA only
        (call,) = r["generate_calls"]
        assert call["sequences"] == 8
        assert call["tokens"] == 8 * r["completion_tokens"]  # the random model never stops early
        assert r["gen_tokens_per_s"] == pytest.approx(call["tokens"] / call["s"])
        assert r["completions_no_code"] == 8 and r["peak_gpu_mem_gib"] is None
        assert r["decode_compile_allowed"] == (r["generator"] == "hf-static")
        # one evaluator call per step, each after that step's generation ended and before the next began
        assert len(r["reward_calls"]) == r["steps"] and r["reward_calls_overlapping_generation"] == 0
        pairs = zip(r["generate_calls"], r["reward_calls"], strict=True)
        assert all(g["end"] <= w["start"] for g, w in pairs)
    table = (out / "bench_grpo.md").read_text()
    assert "| tiny (0 M) | hf-paged | 1 | 16 |" in table
    assert not list(tmp_path.glob("bench-grpo-*"))  # the scratch weights are removed


def test_bench_architectures_match_the_published_configs():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_grpo import ARCHS

    for size, want in (
        ("1.5b", (1536, 8960, 12, 2, 151936, True)),
        ("7b", (3584, 18944, 28, 4, 152064, False)),
    ):
        a = ARCHS[size]
        got = (a["hidden_size"], a["intermediate_size"], a["num_attention_heads"], a["num_key_value_heads"],
               a["vocab_size"], a["tie_word_embeddings"])  # fmt: skip
        assert got == want and a["num_hidden_layers"] == 28
        assert (
            a["hidden_size"] % a["num_attention_heads"] == 0
            and a["hidden_size"] // a["num_attention_heads"] == 128
        )
