"""A lane starts its trusted worker, and the first candidate's worker, before it takes the machine's
lane lock (warpk.evaluator.lane): their torch imports run off the lane's cores and never inside
another run's wait, and a trusted worker that cannot start is the harness's failure, in one line."""

import os
import sys

import pytest

from tests.conftest import MACHINE_CORES
from warpk.evaluator.errors import HarnessFailure
from warpk.evaluator.lane import Lane
from warpk.evaluator.sandbox import Limits
from warpk.evaluator.trusted_process import TrustedProcess

CORES = sorted(MACHINE_CORES)  # this xdist worker's share is taken back (`all_cores`)


class Taken(Exception):
    """The fake lock's way of stopping the measurement once it is asked for."""


class WatchedLock:
    def __init__(self, lane: Lane):
        self.lane, self.seen = lane, []

    def held(self):
        trusted = self.lane.trusted
        self.seen.append((trusted.ready, trusted.alive(), self.lane.spare is not None))
        raise Taken


@pytest.mark.skipif(len(CORES) < 2, reason="a lane of its own needs two cores")
def test_the_machine_lock_is_taken_once_the_trusted_worker_is_ready_and_the_next_worker_started(all_cores):
    lane = Lane(None, "process", Limits(2.0, 1, False, cores=(CORES[0],)), {}, free_cores=(CORES[1],))
    lock = lane.machine_lock = WatchedLock(lane)
    try:
        assert not lane.trusted.ready and lane.spare is None
        with pytest.raises(Taken):
            lane.measure(None, None, 60.0)
        assert lock.seen == [(True, True, True)]
        assert lane.spare_ready  # its torch imported, its Ready read here, not by the trusted worker
        assert os.sched_getaffinity(lane.spare.proc.pid) == {CORES[1]}  # off the lane's core
        with pytest.raises(Taken):  # the same lane again: nothing new started
            lane.measure(None, None, 60.0)
        assert lock.seen[-1] == (True, True, True)
    finally:
        lane.close()


@pytest.mark.skipif(len(CORES) < 2, reason="a lane of its own needs two cores")
def test_a_next_worker_that_dies_before_it_is_ready_is_dropped_not_handed_on(all_cores):
    lane = Lane(None, "process", Limits(2.0, 1, False, cores=(CORES[0],)), {}, free_cores=(CORES[1],))
    lock = lane.machine_lock = WatchedLock(lane)
    try:
        lane.trusted.start()  # so the measurement keeps the spare it finds (a new trusted worker drops it)
        lane.spare = lane._new_spare()
        lane.spare.kill()
        with pytest.raises(Taken):
            lane.measure(None, None, 60.0)
        assert lock.seen == [(True, True, False)] and not lane.spare_ready  # a fresh one comes later
    finally:
        lane.close()


def test_a_trusted_worker_that_dies_before_it_is_ready_is_a_harness_failure(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/bin/false")
    trusted = TrustedProcess({}, 1)
    trusted.start()
    with pytest.raises(HarnessFailure, match="^the trusted worker did not start"):
        trusted.wait_ready(30.0)
    assert trusted.proc is None and not trusted.ready  # closed: the next measurement starts another
