"""policy.lean_sampling: GRPO samples with half-precision copies of the LoRA adapters and without a
host sync per token, and leaves the fp32 masters exactly as they were."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _lora_mlp(dtype):
    """A real peft LoRA model over a two-layer MLP whose base is in `dtype` (peft keeps the
    adapters in fp32 whatever the base, as it does for the Qwen policies)."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dtype)
    model = get_peft_model(base, LoraConfig(r=4, target_modules=["0", "2"], init_lora_weights=False))
    return model


def _lora(model):
    return {n: p for n, p in model.named_parameters() if "lora_" in n}


def test_adapters_are_sampled_in_the_bases_dtype_and_their_masters_come_back_bitwise():
    from warpk.trainers.lean_sampling import AdapterCopies

    model = _lora_mlp(torch.bfloat16)
    lora = _lora(model)
    assert lora and all(p.dtype == torch.float32 for p in lora.values())
    masters = {n: p.data_ptr() for n, p in lora.items()}
    params = dict(lora)
    before = {n: p.detach().clone() for n, p in lora.items()}
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    copies = AdapterCopies()
    pointers = []
    for _ in range(2):
        with copies(model) as swapped:
            assert swapped == len(lora)
            inside = _lora(model)
            assert all(p.dtype == torch.bfloat16 for p in inside.values())
            pointers.append([p.data_ptr() for p in inside.values()])
            with torch.no_grad():
                out = model(x)
            assert out.dtype == torch.bfloat16
        for n, p in _lora(model).items():  # the very Parameter the optimizer holds, unrounded
            assert p is params[n] and p.data_ptr() == masters[n]
            assert p.dtype == torch.float32 and torch.equal(p, before[n])
    assert pointers[0] == pointers[1]  # the same copies every call (a CUDA graph's addresses hold)
    assert all(not p.requires_grad for p in copies.copies.values())
    # what was sampled is the policy up to bf16 rounding of the adapters
    with torch.no_grad():
        reference = model(x)
    assert torch.allclose(out.float(), reference.float(), atol=0.05)


def test_an_fp32_policy_is_left_alone_and_an_error_still_restores_the_masters():
    from warpk.trainers.lean_sampling import AdapterCopies, half_precision

    fp32 = _lora_mlp(torch.float32)
    assert not half_precision(fp32)
    with AdapterCopies()(fp32) as swapped:
        assert swapped == 0
    bf16 = _lora_mlp(torch.bfloat16)
    masters = {n: (p, p.data_ptr()) for n, p in _lora(bf16).items()}
    with pytest.raises(RuntimeError, match="boom"), AdapterCopies()(bf16):
        raise RuntimeError("boom")
    for n, p in _lora(bf16).items():
        assert p is masters[n][0] and p.data_ptr() == masters[n][1] and p.dtype == torch.float32


def test_sampling_keeps_each_masters_gradient_accumulator():
    """DDP all-reduces a parameter's gradient through hooks on its gradient accumulator (the
    autograd node that sums into .grad). Changing a master's dtype in place (`param.data = ...`,
    even back again) replaces that node and leaves DDP's hooks on a dead one; the copies must not."""
    from warpk.trainers.lean_sampling import AdapterCopies

    def accumulator(p):
        return p.view_as(p).grad_fn.next_functions[0][0]

    model = _lora_mlp(torch.bfloat16)
    lora = _lora(model)
    before = {n: accumulator(p) for n, p in lora.items()}
    with AdapterCopies()(model), torch.no_grad():
        model(torch.randn(3, 8, dtype=torch.bfloat16))
    assert all(accumulator(p) is before[n] for n, p in _lora(model).items())
    model(torch.randn(3, 8, dtype=torch.bfloat16)).float().sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in _lora(model).values())
    # the in-place dtype change the copies avoid does replace the node
    p = next(iter(lora.values()))
    master = p.data
    p.data = master.to(torch.bfloat16)
    p.data = master
    assert accumulator(p) is not before[next(iter(lora))]


def test_the_deferred_stop_check_is_allowed_on_cuda_only_inside_the_block():
    from transformers.generation.utils import DeferredStopCheck

    from warpk.trainers.lean_sampling import deferred_stop_check

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert not DeferredStopCheck.is_supported(cuda, None, False, False)  # transformers: mps only
    with pytest.raises(RuntimeError), deferred_stop_check() as enabled:
        assert enabled
        assert DeferredStopCheck.is_supported(cuda, None, False, False)
        assert not DeferredStopCheck.is_supported(cuda, None, False, True)  # assisted: never
        assert not DeferredStopCheck.is_supported(cpu, None, False, False)  # other devices: as before
        raise RuntimeError
    assert not DeferredStopCheck.is_supported(cuda, None, False, False)


def test_grpo_generates_under_both_when_the_policy_is_half_precision(monkeypatch):
    """The trainer's generation runs inside both blocks; the trainer is trl's own class where
    nothing applies (an fp32 CPU policy)."""
    from transformers.generation.utils import DeferredStopCheck
    from trl import GRPOTrainer

    from warpk.trainers.grpo import trainer_class

    seen = {}

    def generate(self, *args, **kwargs):
        seen["dtypes"] = {p.dtype for p in _lora(self.model).values()}
        seen["deferred"] = DeferredStopCheck.is_supported(torch.device("cuda"), None, False, False)
        return [[1, 2]], None

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", generate)
    assert trainer_class(1.0, None, lean_sampling=False) is GRPOTrainer
    cls = trainer_class(1.0, None, lean_sampling=True)
    trainer = object.__new__(cls)
    trainer.model = _lora_mlp(torch.bfloat16)
    assert cls._generate_single_turn(trainer, [[0]], None, {}, 8) == ([[1, 2]], None)
    assert seen == {"dtypes": {torch.bfloat16}, "deferred": True}
    assert {p.dtype for p in _lora(trainer.model).values()} == {torch.float32}
