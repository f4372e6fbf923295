"""Arm labels come from what ran, never from a default key (warpk.report.runs.what_ran)."""

from warpk.report.runs import REFERENCE_ARM, what_ran


def test_an_arm_names_what_ran():
    assert what_ran({"stage": "train", "model": {"name": "m1"}}) == "train/m1"
    assert what_ran({"stage": "runtime", "model": {"name": "m4"}}) == "runtime/m4"
    # an evaluation of the bundled solutions is the reference, whatever model= said
    bundled = {"stage": "evaluate", "model": {"name": "m0"}, "policy": {}, "evaluate": {}}
    assert what_ran(bundled) == REFERENCE_ARM
    candidates = {"stage": "evaluate", "model": {"name": "m2"}, "evaluate": {"candidates_dir": "/c"}}
    assert what_ran(candidates) == "evaluate/candidates"


def test_a_sampled_policy_is_labelled_with_the_arm_that_trained_it():
    sampled = {"stage": "evaluate", "policy": {"name": "small", "checkpoint": "/runs/x/adapter"}}
    assert what_ran(sampled, {"trained_arm": "m1"}) == "evaluate/small/m1"
    assert what_ran(sampled, {"trained_arm": "m3"}) != what_ran(sampled, {"trained_arm": "m1"})
    assert what_ran(sampled, {}) == "evaluate/small/unknown-arm"  # a summary from before trained_arm
