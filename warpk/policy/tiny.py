"""The in-process policies, `policy=tiny` and `policy=small`: a Qwen2-architecture causal LM and
a BPE tokenizer built here, no download.

- `tiny` is for plumbing: CPU tests and laptop runs need the real loading path
  (`from_pretrained(folder)`, chat template, generate, LoRA) in seconds. It is random and writes
  nonsense; its LoRA on q/k/v/o (embeddings and head frozen) cannot learn to write code.
- `small` is for learning on a CPU (docs/training.md, "A policy that learns on a CPU"): every
  parameter trains (`policy.finetune=full`), and its tokenizer also knows the prompt's fixed text,
  so prompts are ~30% shorter. Its tokenizer never sees a held-out solution: its corpus is the
  problems (they are in every prompt anyway), the train split's solutions and the prompt's
  instructions.

Tokenizers are trained with Qwen's pre-tokenizer regex, because transformers 5 loads a
`model_type=qwen2` folder as `Qwen2Tokenizer`, which rebuilds Qwen's pre-tokenizer and keeps only
the vocab and merges (shared/notes/trl_wandb_handson.md section 2); any other pre-tokenizer
would give different ids through `AutoTokenizer`.

Build is deterministic (fixed seed, sorted corpus) and cached under `cache_dir/<name>-<hash>`,
the hash covering the settings, the recipe version and the corpus text. The folder is written to
a temporary sibling and renamed, so a crashed build never leaves a half folder that looks cached.
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
VOCAB_SIZE = 1024  # tiny's; small's is SMALL_VOCAB_SIZE
SMALL_VOCAB_SIZE = 4096  # more merges than the corpus needs: ~555 prompt tokens, ~118 per solution
SEED = 0
LOCAL_POLICIES = ("tiny", "small")
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
    """tiny's tokenizer text: bundled problems and solutions, in sorted (deterministic) order."""
    files = sorted((root / "problems").glob("*.py")) + sorted((root / "solutions").glob("*/*.py"))
    if not files:
        raise FileNotFoundError(f"no tokenizer corpus under {root}/problems or {root}/solutions")
    return files


def small_corpus(root: Path = BUNDLED_ROOT) -> list[str]:
    """small's tokenizer text: every problem, the train split's solutions, the prompt's fixed text."""
    from warpk.policy.prompt import RULES, SYSTEM_PROMPT
    from warpk.tasks import load_task_file

    problems = sorted((root / "problems").glob("*.py"))
    train = [p for p in problems if load_task_file(p).split == "train"]
    solutions = [s for p in train for s in sorted((root / "solutions" / p.stem).glob("*.py"))]
    if not solutions:
        raise FileNotFoundError(f"no train-split solutions under {root}/solutions")
    # the instructions repeat in every prompt: weigh them like that many files
    return [p.read_text() for p in problems + solutions] + [SYSTEM_PROMPT, RULES] * len(problems)


def _corpus(config: PolicyConfig, root: Path | None = None) -> list[str]:
    """small's corpus is the suite it trains on (`root`: the bundled suite, or a generated one)."""
    if config.name == "small":
        return small_corpus(root or BUNDLED_ROOT)
    return [p.read_text() for p in corpus_files()]


def _vocab(config: PolicyConfig) -> int:
    return SMALL_VOCAB_SIZE if config.name == "small" else VOCAB_SIZE


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
    settings = {"recipe": RECIPE_VERSION, "vocab": _vocab(config), "seed": SEED, **_shape(config)}
    if config.name != "tiny":  # tiny's hash predates the other presets; keep its folders valid
        settings["preset"] = config.name
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()[:16]


def _train_tokenizer(texts: list[str], vocab_size: int = VOCAB_SIZE):
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
        vocab_size=vocab_size,
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

    tokenizer = _train_tokenizer(texts, _vocab(config))
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


def build_tiny_policy(config: PolicyConfig, cache_dir: Path, corpus_root: Path | None = None) -> Path:
    """Build an in-process policy (tiny or small) once and return its folder (reused when the
    hash matches).

    Args:
        config: the `policy` group; hidden_size and num_hidden_layers set the model's size.
        cache_dir: parent folder; the result is `cache_dir/<name>-<hash>`.
        corpus_root: small's tokenizer corpus, a suite folder (problems/, solutions/); None: the
            bundled suite. The folder's hash covers the corpus.

    Returns:
        A folder loadable by `AutoTokenizer.from_pretrained` and `AutoModelForCausalLM.from_pretrained`.
    """
    if config.name not in LOCAL_POLICIES:
        raise ValueError(f"policy={config.name} is not built in-process; those are {LOCAL_POLICIES}")
    texts = _corpus(config, corpus_root)
    cache_dir = Path(cache_dir)
    folder = cache_dir / f"{config.name}-{settings_hash(config, texts)}"
    if (folder / "model.safetensors").is_file():
        return folder
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{config.name}-build-", dir=cache_dir))
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
