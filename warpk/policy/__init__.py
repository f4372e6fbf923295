"""The kernel-writing policy: loading (tiny or a local Qwen cache), LoRA settings, prompt and extraction.

`completions` turns completions into evaluator records (one home for the reward source and the
policy evaluation). Non-goals: training loops (warpk.trainers) and reward arithmetic (warpk.rewards).
"""

from warpk.policy.load import PolicyWeightsMissing, expected_hf_path, hf_cache_dir, load_policy, lora_config
from warpk.policy.prompt import build_prompt, extract_code
from warpk.policy.tiny import build_tiny_policy

__all__ = [
    "PolicyWeightsMissing",
    "build_prompt",
    "build_tiny_policy",
    "expected_hf_path",
    "extract_code",
    "hf_cache_dir",
    "load_policy",
    "lora_config",
]
