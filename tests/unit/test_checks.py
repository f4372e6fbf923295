"""The inputs-unchanged check (warpk.evaluator.checks.same_inputs): bitwise, at any alignment."""

import pytest
import torch

from warpk.evaluator.checks import same_inputs


@pytest.mark.parametrize("make", [
    lambda: torch.randn(64, 33),
    lambda: torch.randn(5, dtype=torch.float16)[1:],  # 8 bytes at an offset of 2: compared as int16
    lambda: torch.arange(10)[1:],
    lambda: torch.randn(3, 5)[:, ::2],  # not contiguous
    lambda: torch.ones(7, dtype=torch.bool),
    lambda: torch.randn(3, dtype=torch.complex64),
])
def test_an_untouched_copy_is_the_same_and_one_changed_element_is_not(make):
    x = make()
    assert same_inputs(torch, [x], [x.clone()])
    changed = x.clone()
    changed.view(-1)[0] = 0 if x.dtype == torch.bool else changed.view(-1)[0] + 1
    if x.dtype == torch.bool:
        changed = ~x.clone()
    assert not same_inputs(torch, [x], [changed])


def test_nan_where_nan_was_is_the_same_a_sign_flip_of_zero_is_a_change():
    x = torch.tensor([1.0, float("nan"), 0.0])
    assert same_inputs(torch, [x], [x.clone()])
    assert not same_inputs(torch, [x], [torch.tensor([1.0, 2.0, 0.0])])
    assert not same_inputs(torch, [x], [torch.tensor([1.0, float("nan"), -0.0])])


def test_shape_dtype_or_count_differences_are_changes():
    x = torch.zeros(4)
    assert not same_inputs(torch, [x], [x.reshape(2, 2)])
    assert not same_inputs(torch, [x], [x.double()])
    assert not same_inputs(torch, [x, x], [x])


def test_a_lazy_conjugate_is_compared_and_fingerprinted_by_its_values():
    # the task's reference runs in the trusted worker, and its output may be a conjugate view,
    # which view_as_real refuses: an honest complex task was a harness failure (CPU, 2026-12-07)
    from types import SimpleNamespace

    from warpk.evaluator.checks import Verdict, check_correct, fingerprint

    x = torch.randn(4, 8)
    lazy = torch.fft.fft(x).conj()
    assert lazy.is_conj()
    protocol = SimpleNamespace(tolerance_fp32=1e-4, tolerance_low_precision=1e-2)
    assert check_correct(torch, lazy, lazy.resolve_conj().clone(), protocol, "trial 0")[0] == 0.0
    with pytest.raises(Verdict, match="differs"):
        check_correct(torch, lazy, torch.fft.fft(x), protocol, "trial 0")  # not conjugated
    assert fingerprint(torch, [lazy]) == fingerprint(torch, [lazy.resolve_conj()])
