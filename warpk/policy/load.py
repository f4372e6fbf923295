"""Load the policy named by `policy=...` and its LoRA settings.

`tiny` and `small` are built in-process (warpk.policy.tiny); the Qwen presets load from a local Hugging Face
cache: `WARPK_HF_CACHE` (else `<cache_dir>/hf`) is passed as `cache_dir`, and
`WARPK_HF_LOCAL_FILES_ONLY=1` forbids any download. Missing weights raise `PolicyWeightsMissing`
naming the expected folder and both variables, never a silent download attempt in tests.

Non-goals: no quantisation, no device placement policy (callers move the model), no training.
"""

from __future__ import annotations

import os
from pathlib import Path

from warpk.config import PolicyConfig
from warpk.policy.tiny import LOCAL_POLICIES, build_tiny_policy

HF_CACHE_ENV = "WARPK_HF_CACHE"
LOCAL_ONLY_ENV = "WARPK_HF_LOCAL_FILES_ONLY"


class PolicyWeightsMissing(FileNotFoundError):
    """The preset's weights are not in the local cache; the message says where they were expected."""


def hf_cache_dir(cache_dir: Path) -> Path:
    """Where Hugging Face weights are looked up: $WARPK_HF_CACHE, else `cache_dir/hf`."""
    env = os.environ.get(HF_CACHE_ENV, "").strip()
    return Path(env) if env else Path(cache_dir) / "hf"


def local_files_only() -> bool:
    """True when WARPK_HF_LOCAL_FILES_ONLY is 1/true/yes: no network access at all."""
    return os.environ.get(LOCAL_ONLY_ENV, "").strip().lower() in {"1", "true", "yes"}


def expected_hf_path(hf_id: str, hf_cache: Path) -> Path:
    """The hub cache layout's folder for `hf_id`, e.g. <cache>/models--Qwen--Qwen2.5-Coder-7B-Instruct."""
    return hf_cache / ("models--" + hf_id.replace("/", "--"))


def _missing(config: PolicyConfig, hf_cache: Path, why: str) -> PolicyWeightsMissing:
    path = expected_hf_path(config.hf_id or "", hf_cache)
    return PolicyWeightsMissing(
        f"policy={config.name}: weights of {config.hf_id} not found at {path} ({why}). "
        f"Put a Hugging Face hub cache holding them there, or point {HF_CACHE_ENV} at one; "
        f"{LOCAL_ONLY_ENV}=1 forbids downloading (now {os.environ.get(LOCAL_ONLY_ENV, 'unset')!r})."
    )


def require_weights(config: PolicyConfig, cache_dir: Path) -> None:
    """Preflight: with downloads forbidden, a Qwen preset's weights must be in the local cache.
    (Where downloads are allowed nothing can be known before trying.)"""
    if config.name in LOCAL_POLICIES or not config.hf_id or not local_files_only():
        return
    hf_cache = hf_cache_dir(Path(cache_dir))
    if not expected_hf_path(config.hf_id, hf_cache).is_dir():
        raise _missing(config, hf_cache, "no such folder")


def load_policy(config: PolicyConfig, cache_dir: Path, dtype=None, corpus_root: Path | None = None):
    """The policy's (model, tokenizer), model on the CPU in `dtype` (default float32).

    Args:
        config: the `policy` group.
        cache_dir: where `tiny` is built and, without $WARPK_HF_CACHE, where hub weights live (`/hf`).
        dtype: torch dtype of the weights, e.g. torch.bfloat16 for GPU training; None = float32.
        corpus_root: the suite folder small's tokenizer is trained on (None: the bundled suite).

    Raises:
        PolicyWeightsMissing: a Qwen preset whose weights are not in the local cache.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = dtype or torch.float32
    if config.name in LOCAL_POLICIES:
        folder = build_tiny_policy(config, Path(cache_dir), corpus_root)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        return model, tokenizer
    if not config.hf_id:
        raise ValueError(f"policy={config.name} needs policy.hf_id")
    hf_cache = hf_cache_dir(Path(cache_dir))
    local_only = local_files_only()
    require_weights(config, Path(cache_dir))
    kwargs = {"cache_dir": str(hf_cache), "local_files_only": local_only}
    try:
        tokenizer = AutoTokenizer.from_pretrained(config.hf_id, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(config.hf_id, dtype=dtype, **kwargs)
    except OSError as err:  # transformers reports a missing file or a failed download as OSError
        raise _missing(config, hf_cache, str(err).splitlines()[0] if str(err) else "load failed") from err
    return model, tokenizer


def lora_config(config: PolicyConfig):
    """The preset's LoRA adapter settings as a peft LoraConfig for a causal LM."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )
