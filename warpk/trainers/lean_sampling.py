"""GRPO's sampling without two costs a decode step pays under transformers' generate on a GPU
(`policy.lean_sampling`, docs/training.md "Generation speed"):

- fp32 LoRA matmuls: peft keeps the adapters in fp32 over a bf16 base, so every adapter matmul of
  a decode step is a small fp32 GEMM plus casts of its input and output (18% of the GPU time of a
  1.5B decode step, docs/benchmarks.md 2026-12-04). `AdapterCopies` gives each adapter module a
  copy of its weight in the base's dtype while sampling and its fp32 master back afterwards: the
  masters, which the optimizer updates and the loss scores with, are never touched. The copies
  are the same tensors every call, so a compiled decode step's CUDA graphs keep their addresses.
- a host sync per token: generate's stop check reads `unfinished.max() == 0` on the host every
  step, so the CPU cannot queue step t+1 while the GPU runs step t. transformers ships a deferred
  check (read one step late, the extra step undone) that it enables on "mps" only;
  `deferred_stop_check` enables it on CUDA for the duration of the call.

The sampled tokens come from the same policy up to bf16 rounding of the adapters' contribution (the
base is bf16 already); `train.credit_cutoff` and the loss still score them with the fp32 masters.
Both are no-ops on a CPU policy in fp32.
"""

from __future__ import annotations

from contextlib import contextmanager


class AdapterCopies:
    """Copies of a model's fp32 LoRA weights in the base's dtype, made once and refreshed on each
    use (so their storage, and a CUDA graph's view of it, is the same every call).

    The copies are separate Parameters (no grad) put in the adapters' modules in place of their
    masters, and the masters put back afterwards. A master itself is never touched: changing a
    Parameter's dtype in place (`param.data = ...`) would drop its gradient accumulator, and with it
    the hooks DDP all-reduces its gradients through."""

    def __init__(self) -> None:
        self.copies: dict[int, object] = {}

    @contextmanager
    def __call__(self, model):
        import torch

        target = base_dtype(model)
        swapped = []
        try:
            if target in (torch.bfloat16, torch.float16):
                with torch.no_grad():
                    for module_name, module in model.named_modules():
                        for name, master in list(module._parameters.items()):
                            if master is None or master.dtype != torch.float32:
                                continue
                            if "lora_" not in f"{module_name}.{name}":
                                continue
                            copy = self.copies.get(id(master))
                            if copy is None or copy.shape != master.shape or copy.device != master.device:
                                copy = torch.nn.Parameter(torch.empty_like(master, dtype=target),
                                                          requires_grad=False)
                                self.copies[id(master)] = copy
                            copy.copy_(master)
                            swapped.append((module, name, master))
                            module._parameters[name] = copy
            yield len(swapped)
        finally:
            for module, name, master in swapped:
                module._parameters[name] = master


@contextmanager
def lean(trainer):
    """Sampling under both, where the trainer's class asks for it (`lean_sampling` = True)."""
    if not getattr(type(trainer), "lean_sampling", False):
        yield
        return
    copies = trainer.__dict__.setdefault("_adapter_copies", AdapterCopies())
    with copies(trainer.model), deferred_stop_check():
        yield


def half_precision(model) -> bool:
    """Whether the model's base computes in bf16 or fp16 (where lean sampling has work to do)."""
    import torch

    return base_dtype(model) in (torch.bfloat16, torch.float16)


def base_dtype(model):
    """The dtype of the model's frozen (non-LoRA) floating-point weights: what a decode step computes in."""
    for name, param in model.named_parameters():
        if "lora_" not in name and param.is_floating_point():
            return param.dtype
    return None


@contextmanager
def deferred_stop_check():
    """transformers' deferred stop check allowed on CUDA within this block (it decides itself
    whether the cache allows it: only where generate does not return the cache). A transformers
    without it is left as it is."""
    try:
        from transformers.generation.utils import DeferredStopCheck
    except ImportError:
        yield False
        return
    original = DeferredStopCheck.__dict__["is_supported"]

    def is_supported(device, cache, cache_is_returned, is_assistant):
        if device.type == "cuda" and not is_assistant:
            return cache is None or cache.is_croppable or not cache_is_returned
        return original.__func__(device, cache, cache_is_returned, is_assistant)

    DeferredStopCheck.is_supported = staticmethod(is_supported)
    try:
        yield True
    finally:
        DeferredStopCheck.is_supported = original
