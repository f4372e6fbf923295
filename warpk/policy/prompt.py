"""What the policy is asked and what is taken from its answer.

`build_prompt` writes chat messages (system + user) holding the task's source, the hardware and
the output contract; `extract_code` takes the candidate back out of a completion. The contract is
one fenced python block defining `class ModelNew`. When a completion holds several such blocks
the LAST one wins: models often draft, then correct themselves, and the final block is the answer
they settled on. Anything else (no fence, an unterminated fence, no `class ModelNew`) gives None,
which the reward scores at the no-code tier.

Non-goals: no parsing or executing the code (the evaluator does that in its sandbox); the class
check is a regex on the text, not a syntax check, so a block that merely defines a broken
`ModelNew` is returned and fails later as a compile error, which is the right tier.
"""

from __future__ import annotations

import re

from warpk.tasks import Task

SYSTEM_PROMPT = (
    "You are an expert GPU kernel engineer. You rewrite PyTorch reference models into faster, "
    "more energy-efficient implementations that give the same outputs."
)

RULES = """Write a class `ModelNew(nn.Module)` that computes exactly what `Model` computes, faster.
- You may use custom CUDA kernels compiled with torch.utils.cpp_extension.load_inline, Triton \
kernels (@triton.jit), or plain PyTorch operators.
- `ModelNew.__init__` must take the same arguments as `Model.__init__`; `forward` the same inputs.
- Do not use try/except, threads or processes, and do not read or write files.
- Do not redefine `get_inputs` or `get_init_inputs`.
- Answer with exactly one fenced code block: ```python ... ``` holding the complete module \
(imports included). Text outside the block is ignored."""

# A fence opens with ```python or ```py (optionally with trailing text) at the start of a line
# and closes with ``` on a line of its own.
_BLOCK = re.compile(r"^```[ \t]*(?:python|py)\b[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_MODEL_NEW = re.compile(r"^class[ \t]+ModelNew\b", re.MULTILINE)


def build_prompt(task: Task, hardware_name: str) -> list[dict]:
    """Chat messages asking for a faster `ModelNew` for `task` on `hardware_name`.

    Args:
        task: the task; its problem file's full source goes into the prompt.
        hardware_name: e.g. "h200" or "cpu"; the model is told where its code will run.
    """
    source = task.path.read_text()
    user = (
        f"Target hardware: {hardware_name}.\n\n"
        f"Here is the reference PyTorch module `Model` (task {task.name}) with its inputs:\n\n"
        f"```python\n{source.rstrip()}\n```\n\n{RULES}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def extract_code(completion: str) -> str | None:
    """The last fenced python block of `completion` that defines `class ModelNew`, else None."""
    blocks = [b for b in _BLOCK.findall(completion) if _MODEL_NEW.search(b)]
    return blocks[-1] if blocks else None
