"""The `policy=tiny` model: a Qwen2-architecture causal LM and a BPE tokenizer built in-process.

Why: CPU tests and laptop runs need the real loading path (`from_pretrained(folder)`, chat
template, generate, LoRA on q/k/v/o) without downloading weights. The tokenizer is trained on the
bundled kernelbench/ sources with Qwen's pre-tokenizer regex, because transformers 5 loads a
`model_type=qwen2` folder as `Qwen2Tokenizer`, which rebuilds Qwen's pre-tokenizer and keeps only
the vocab and merges (shared/notes/trl_wandb_handson.md section 2); any other pre-tokenizer
would give different ids through `AutoTokenizer`.

Build is deterministic (fixed seed, sorted corpus) and cached under `cache_dir/tiny-<hash>`, the
hash covering the settings, the recipe version and the corpus text. The folder is written to a
temporary sibling and renamed, so a crashed build never leaves a half folder that looks cached.

Non-goals: the model is random and writes nonsense; it is for plumbing, not for quality.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from warpk.config import PolicyConfig
from warpk.tasks import BUNDLED_ROOT

RECIPE_VERSION = 1  # bump when the build below changes what it writes
VOCAB_SIZE = 1024
SEED = 0
MAX_POSITIONS = 4096
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen2's pre-tokenizer split (the regex Qwen2Tokenizer hard-codes).
QWEN_PRETOKENIZE = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def corpus_files(root: Path = BUNDLED_ROOT) -> list[Path]:
    """The tokenizer's training text: bundled problems and solutions, in sorted (deterministic) order."""
    files = sorted((root / "problems").glob("*.py")) + sorted((root / "solutions").glob("*/*.py"))
    if not files:
        raise FileNotFoundError(f"no tokenizer corpus under {root}/problems or {root}/solutions")
    return files


def _shape(config: PolicyConfig) -> dict:
    hidden = config.hidden_size or 64
    heads = hidden // 16 if hidden % 16 == 0 else 1  # head_dim 16 where it divides
    kv_heads = heads // 2 if heads % 2 == 0 else heads
    return {
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": config.num_hidden_layers or 2,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
    }


def settings_hash(config: PolicyConfig, texts: list[str]) -> str:
    """Content hash of everything the built folder depends on (16 hex digits)."""
    digest = hashlib.sha256()
    settings = {"recipe": RECIPE_VERSION, "vocab": VOCAB_SIZE, "seed": SEED, **_shape(config)}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()[:16]


def _train_tokenizer(texts: list[str]):
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(BPE(unk_token=None))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=MAX_POSITIONS,
        padding_side="left",  # generation pads on the left
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    return hf_tok


def _write(config: PolicyConfig, texts: list[str], folder: Path) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = _train_tokenizer(texts)
    model_config = Qwen2Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **_shape(config),
    )
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM(model_config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)


def build_tiny_policy(config: PolicyConfig, cache_dir: Path) -> Path:
    """Build the tiny policy once and return its folder (reused when the hash matches).

    Args:
        config: the `policy` group; hidden_size and num_hidden_layers set the model's size.
        cache_dir: parent folder; the result is `cache_dir/tiny-<hash>`.

    Returns:
        A folder loadable by `AutoTokenizer.from_pretrained` and `AutoModelForCausalLM.from_pretrained`.
    """
    texts = [p.read_text() for p in corpus_files()]
    cache_dir = Path(cache_dir)
    folder = cache_dir / f"tiny-{settings_hash(config, texts)}"
    if (folder / "model.safetensors").is_file():
        return folder
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-build-", dir=cache_dir))
    try:
        _write(config, texts, staging)
        try:
            os.replace(staging, folder)
        except OSError:  # another process finished the same build first; theirs is identical
            if not (folder / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
