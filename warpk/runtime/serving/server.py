"""The server inside `ServingEnv` (env.py): its queue, its running batch and its clock.

The scheduling is env.py's (its module docstring): waiting requests admitted in arrival order
while fewer than `concurrency` run, admitted prompts prefilled together within the prefill token
budget, otherwise one decode iteration of every running sequence, consecutive ones with the same
batch advanced together up to the next event.

Why plain Python numbers and not numpy arrays: a control period runs ~30 such iterations on a
batch of at most a few hundred sequences, and numpy's per-call overhead on arrays that small was
most of M4's training time. Token counts are Python ints, exact as the int64 arrays were; every
float is computed with the same operations in the same order as with the arrays, so an episode
is the same to the last bit. Decoding k steps moves one counter (`decoded_tokens`) instead of
every sequence's: a sequence ends when the counter reaches its `end`, and the batch's context is
its sum at admission plus batch x counter.

Non-goals: no observation or reward here (env.py); no preemption, no KV-cache limit.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from warpk.runtime.serving.calibration import SettingCost
from warpk.runtime.serving.workload import Trace


@dataclass(slots=True)
class Window:
    """What the server did in one control period (the observation's and the reward's inputs)."""

    energy_j: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0


class Server:
    """The state of one episode's server; `serve` runs it to a time, returning who finished."""

    def __init__(self, trace: Trace, max_prefill_tokens: int) -> None:
        self.arrival_s: list[float] = trace.arrival_s.tolist()
        self.prompt_tokens: list[int] = trace.prompt_tokens.tolist()
        self.output_tokens: list[int] = trace.output_tokens.tolist()
        self.max_prefill_tokens = max_prefill_tokens
        n = len(self.arrival_s)
        self.first_token_s, self.finish_s = [math.nan] * n, [math.nan] * n
        self.t, self.arrived, self.admitted = 0.0, 0, 0
        self.energy_j = 0.0
        self.window = Window()
        self.running = 0  # requests in the batch: those admitted, not finished
        self.oldest_running = 0  # no request below this index is running
        self.ends: list[tuple[int, int]] = []  # heap of (decoded_tokens at its last token, request)
        self.context_offsets = [0] * n  # per request: its context - decoded_tokens while it runs
        self.decoded_tokens = 0  # decode steps so far in this episode (every running sequence's clock)
        self.context_base = 0  # the running requests' context_offsets summed: the batch holds this +
        # batch x decoded_tokens tokens
        self.unsettled: list[int] = []  # arrived, neither counted late nor finished in time
        self.checked = 0  # requests [0, checked) have been added to `unsettled` once

    def serve(self, cost: SettingCost, concurrency: int, t_end: float, drain: bool) -> list[int]:
        """Run iterations until t_end (or, draining, until every arrived request is done); the
        requests that finished meanwhile, in the order they did."""
        n = len(self.arrival_s) if not drain else self.arrived
        window_before_j = self.window.energy_j  # a drain continues its period's window
        done: list[int] = []
        while True:
            if not drain and self.arrived < n and self.arrival_s[self.arrived] <= self.t:
                self._arrive()
            if self.t >= t_end or (drain and self.admitted >= n and not self.running):
                break
            waiting, room = self.arrived - self.admitted, concurrency - self.running
            if waiting > 0 and room > 0:
                self._prefill(cost, min(waiting, room))
            elif self.running:
                bound_by_arrival = room > 0 and self.arrived < n and not drain
                self._decode(cost, t_end, bound_by_arrival, drain)
            else:  # idle until the next arrival or the end of the period
                self._idle(cost.idle_power_w, n, t_end)
            if self.ends and self.ends[0][0] <= self.decoded_tokens:
                done += self._finish()
        self.energy_j += self.window.energy_j - window_before_j  # this call's part only (the drain
        #                             added the whole window once more until 2026-12-07: ~2% of an episode)
        return done

    def _arrive(self) -> None:
        """Requests that arrived by now (arrival_s <= t; the trace is sorted)."""
        arrival_s, arrived, t = self.arrival_s, self.arrived, self.t
        while arrived < len(arrival_s) and arrival_s[arrived] <= t:
            arrived += 1
        self.arrived = arrived

    def _admissible(self, count: int) -> int:
        """How many of the next `count` waiting requests fit the prefill token budget (at least 1)."""
        total_tokens, fits = 0, 0
        for tokens in self.prompt_tokens[self.admitted : self.admitted + count]:
            total_tokens += tokens
            if total_tokens > self.max_prefill_tokens:
                break
            fits += 1
        return max(1, fits)

    def _prefill(self, cost: SettingCost, count: int) -> None:
        """Admit the next waiting requests and prefill their prompts in one iteration."""
        first = self.admitted
        admitted = range(first, first + self._admissible(count))
        self.admitted = admitted.stop
        prompts = self.prompt_tokens[admitted.start : admitted.stop]
        # integer sums, exact in a float as numpy's float64 sums of the same prompts were
        dt, e = cost.prefill(float(sum(prompts)), float(sum(p * p for p in prompts)))
        self.t += dt
        self.window.energy_j += e
        self.window.prefill_s += dt
        for i in admitted:
            self.first_token_s[i] = self.t
            heapq.heappush(self.ends, (self.decoded_tokens + self.output_tokens[i] - 1, i))
            offset = self.context_offsets[i] = self.prompt_tokens[i] + 1 - self.decoded_tokens
            self.context_base += offset
        self.running += len(admitted)

    def _decode(self, cost: SettingCost, t_end: float, bound_by_arrival: bool, drain: bool) -> None:
        """Decode steps with this batch up to the next event: a sequence ending, an arrival that
        can be admitted (`bound_by_arrival`), the end of the period (not when draining)."""
        b = self.running
        context = float(self.context_base + b * self.decoded_tokens)
        dt1, _ = cost.decode_step(b, context)
        k = self.ends[0][0] - self.decoded_tokens  # >= 1: finished sequences leave at once
        if bound_by_arrival:
            k = min(k, max(1, math.ceil((self.arrival_s[self.arrived] - self.t) / dt1)))
        if not drain:
            k = min(k, max(1, math.ceil((t_end - self.t) / dt1)))
        dt, e = cost.decode_step(b, context + b * (k - 1) / 2)
        self.t += k * dt
        self.window.energy_j += k * e
        self.window.decode_s += k * dt
        self.decoded_tokens += k

    def _idle(self, idle_power_w: float, n: int, t_end: float) -> None:
        nxt = self.arrival_s[self.arrived] if self.arrived < n else math.inf
        t_next = min(nxt, t_end)
        self.window.energy_j += idle_power_w * (t_next - self.t)
        self.t = t_next

    def _finish(self) -> list[int]:
        """The running requests whose last token is out leave the batch; they finish now (listed
        in admission order, as the batch holds them)."""
        ended = []
        while self.ends and self.ends[0][0] <= self.decoded_tokens:
            i = heapq.heappop(self.ends)[1]
            self.finish_s[i] = self.t
            self.context_base -= self.context_offsets[i]
            ended.append(i)
        self.running -= len(ended)
        while self.oldest_running < self.admitted and not math.isnan(self.finish_s[self.oldest_running]):
            self.oldest_running += 1
        return sorted(ended)

    def newly_late(self, ttft_limit_s: float, e2e_limit_s: float) -> int:
        """Requests that became certain to miss a limit by now and were not counted before: late as
        soon as their age passes a limit unserved, not only when they finish (earlier credit).
        Only the unsettled ones are looked at: a request counted late, or finished in time, stays
        so (its times no longer change)."""
        self.unsettled.extend(range(self.checked, self.arrived))
        self.checked = self.arrived
        now, late, unsettled = self.t, 0, []
        for i in self.unsettled:
            arrival, first, finish = self.arrival_s[i], self.first_token_s[i], self.finish_s[i]
            finished = not math.isnan(finish)
            first = now if math.isnan(first) else first
            finish = finish if finished else now
            if (first - arrival) > ttft_limit_s or (finish - arrival) > e2e_limit_s:
                late += 1
            elif not finished:
                unsettled.append(i)
        self.unsettled = unsettled
        return late

    def latencies_s(self, requests: list[int]) -> tuple[list[float], list[float]]:
        """(TTFT, E2E) of finished requests."""
        arrival_s = self.arrival_s
        return ([self.first_token_s[i] - arrival_s[i] for i in requests],
                [self.finish_s[i] - arrival_s[i] for i in requests])  # fmt: skip


def p95(values: list[float]) -> float:
    """np.percentile(values, 95) of a non-empty list of finite floats, to the last bit (numpy's
    'linear' method: the same virtual index and the same two-sided interpolation), without its
    ~150 us of overhead per call on a few dozen values."""
    n = len(values)
    virtual = (n - 1) * 0.95
    below = math.floor(virtual)
    if below >= n - 1:  # one value
        return max(values)
    ranked = sorted(values)
    a, b, gamma = ranked[below], ranked[below + 1], virtual - below
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma
