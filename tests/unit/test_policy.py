"""The policy: tiny build and reload, offline Qwen loading errors, LoRA settings, prompt, extraction."""

from pathlib import Path

import pytest
import torch

from warpk.config import PolicyConfig
from warpk.policy import (
    PolicyWeightsMissing,
    build_prompt,
    build_tiny_policy,
    expected_hf_path,
    extract_code,
    load_policy,
    lora_config,
)
from warpk.policy import tiny as tiny_module
from warpk.tasks import BUNDLED_ROOT, load_task_file

torch.set_num_threads(1)

TINY = PolicyConfig(
    name="tiny", hidden_size=64, num_hidden_layers=2, lora_r=8, lora_alpha=16, lora_dropout=0.0
)
QWEN_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
QWEN_1_5B = PolicyConfig(
    name="qwen2.5-coder-1.5b",
    hf_id="Qwen/Qwen2.5-Coder-1.5B-Instruct",
    target_modules=QWEN_TARGETS,
    max_new_tokens=2048,
)
SOLUTION = (BUNDLED_ROOT / "solutions" / "01_softmax" / "torch_fused.py").read_text()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return build_tiny_policy(TINY, tmp_path_factory.mktemp("policy-cache"))


def test_tiny_policy_reloads_through_from_pretrained_with_identical_weights(tiny_dir):
    from transformers import AutoModelForCausalLM

    model, tokenizer = load_policy(TINY, tiny_dir.parent)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    again = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    a, b = model.state_dict(), again.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_tiny_build_is_deterministic_across_cache_dirs(tiny_dir, tmp_path):
    other = build_tiny_policy(TINY, tmp_path)
    assert other.name == tiny_dir.name
    for name in ("model.safetensors", "tokenizer.json"):
        assert (other / name).read_bytes() == (tiny_dir / name).read_bytes()


def test_tokenizer_round_trips_code_and_applies_the_chat_template(tiny_dir):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    assert type(tokenizer).__name__ == "Qwen2Tokenizer"  # transformers 5 swaps in Qwen's class
    code = SOLUTION + "\n\tx = y  # tabs, unicode: µs, Ω\r\n"
    assert tokenizer.decode(tokenizer.encode(code)) == code
    # Trained with Qwen's pre-tokenizer, so Qwen2Tokenizer and the saved tokenizer.json agree on ids.
    assert PreTrainedTokenizerFast.from_pretrained(tiny_dir).encode(code) == tokenizer.encode(code)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")


def test_building_twice_reuses_the_cache(tiny_dir, monkeypatch):
    before = (tiny_dir / "model.safetensors").stat().st_mtime_ns

    def no_rebuild(*args, **kwargs):
        raise AssertionError("rebuilt a cached policy")

    monkeypatch.setattr(tiny_module, "_write", no_rebuild)
    assert build_tiny_policy(TINY, tiny_dir.parent) == tiny_dir
    assert (tiny_dir / "model.safetensors").stat().st_mtime_ns == before
    assert [p for p in tiny_dir.parent.iterdir() if p.name.startswith(".tiny-build-")] == []


def test_other_settings_build_another_folder(tiny_dir, tmp_path):
    wider = PolicyConfig(name="tiny", hidden_size=32, num_hidden_layers=1)
    assert build_tiny_policy(wider, tmp_path).name != tiny_dir.name


def test_tiny_policy_generates_a_few_tokens(tiny_dir):
    model, tokenizer = load_policy(TINY, tiny_dir.parent)
    task = load_task_file(BUNDLED_ROOT / "problems" / "01_softmax.py")
    ids = tokenizer.apply_chat_template(
        build_prompt(task, "cpu"), add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    torch.manual_seed(0)
    out = model.generate(**ids, max_new_tokens=5, do_sample=True, temperature=TINY.temperature)
    assert out.shape[1] - ids["input_ids"].shape[1] in range(1, 6)
    assert isinstance(tokenizer.decode(out[0, ids["input_ids"].shape[1] :]), str)


def test_qwen_preset_without_local_weights_names_the_path_and_env_vars(tmp_path, monkeypatch):
    hf_cache = tmp_path / "hf-empty"
    hf_cache.mkdir()
    monkeypatch.setenv("WARPK_HF_CACHE", str(hf_cache))
    monkeypatch.setenv("WARPK_HF_LOCAL_FILES_ONLY", "1")
    with pytest.raises(PolicyWeightsMissing) as err:
        load_policy(QWEN_1_5B, tmp_path / "unused")
    message = str(err.value)
    expected = expected_hf_path(QWEN_1_5B.hf_id, hf_cache)
    assert str(expected) in message
    assert expected.name == "models--Qwen--Qwen2.5-Coder-1.5B-Instruct"
    assert "WARPK_HF_CACHE" in message and "WARPK_HF_LOCAL_FILES_ONLY" in message


def test_lora_config_matches_the_preset():
    lora = lora_config(QWEN_1_5B)
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (16, 32, 0.05)
    assert set(lora.target_modules) == set(QWEN_TARGETS)
    assert str(lora.task_type) in {"CAUSAL_LM", "TaskType.CAUSAL_LM"}
    tiny = lora_config(TINY)
    assert (tiny.r, tiny.lora_alpha, tiny.lora_dropout) == (8, 16, 0.0)


def test_prompt_holds_the_task_source_the_hardware_and_the_rules():
    task = load_task_file(BUNDLED_ROOT / "problems" / "07_attention.py")
    messages = build_prompt(task, "h200")
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert task.path.read_text().rstrip() in user
    assert "h200" in user
    needles = ("class `ModelNew", "load_inline", "Triton", "try/except", "threads", "__init__", "```python")
    for needle in needles:
        assert needle in user


def _fence(code: str) -> str:
    return f"```python\n{code}```"


MODEL_NEW = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
USAGE = "m = ModelNew()\n"
MODEL_NEW_2 = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (f"Here it is:\n{_fence(MODEL_NEW)}\nDone.", MODEL_NEW),
        (f"Draft:\n{_fence(MODEL_NEW)}\nBetter:\n{_fence(MODEL_NEW_2)}\n", MODEL_NEW_2),  # last wins
        (f"{_fence(MODEL_NEW)}\nusage:\n{_fence(USAGE)}", MODEL_NEW),  # later block lacks it
        (_fence("class Model(nn.Module):\n    pass\n"), None),  # no ModelNew
        (f"```\n{MODEL_NEW}```", None),  # fence without a python tag
        ("```cpp\nclass ModelNew {};\n```", None),  # not python
        (MODEL_NEW, None),  # no fence
        (f"```python\n{MODEL_NEW}", None),  # unterminated fence
        ("", None),
        (f"```py\n{MODEL_NEW}```", MODEL_NEW),
    ],
)
def test_extract_code(completion, expected):
    assert extract_code(completion) == expected


def test_small_tokenizer_corpus_holds_no_heldout_solution_and_the_prompt_text():
    from warpk.policy.prompt import RULES

    corpus = tiny_module.small_corpus()
    heldout = [
        s.read_text()
        for p in sorted((BUNDLED_ROOT / "problems").glob("*.py"))
        if load_task_file(p).split == "heldout"
        for s in sorted((BUNDLED_ROOT / "solutions" / p.stem).glob("*.py"))
    ]
    assert heldout and not any(text in corpus for text in heldout)
    assert RULES in corpus and len(corpus) > len(heldout)
