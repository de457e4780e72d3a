"""Client load on a simulated server: arrivals, prompt and output lengths, shared prefixes."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Load:
    """Open loop (Poisson `rate` req/s) when clients == 0, else `clients` closed-loop clients."""

    rate: float = 0.0
    clients: int = 0
    prompt_mean: int = 1500
    max_new_tokens: int = 1024
    eos_fraction: float = 0.3
    eos_max_tokens: int = 0  # early-stopping outputs are uniform in [1, this]; 0 = max_new_tokens
    shared_prefix_fraction: float = 0.0
    prefix_len: int = 1024
    prefix_groups: int = 8
    streaming_fraction: float = 0.8


class Req:
    """One request; lengths in tokens, times in simulated seconds."""

    __slots__ = (
        "prompt",
        "max_new",
        "target",
        "out",
        "arrival",
        "queued_at",
        "first_token",
        "group",
        "cached",
        "shared",
        "done_prefill",
        "streaming",
        "retracted",
    )

    def __init__(
        self, prompt: int, max_new: int, target: int, arrival: float, group: int, streaming: bool
    ) -> None:
        self.prompt, self.max_new, self.target = prompt, max_new, target
        self.arrival = self.queued_at = arrival
        self.first_token = -1.0
        self.out = self.cached = self.shared = self.done_prefill = self.retracted = 0
        self.group, self.streaming = group, streaming

    @property
    def held(self) -> int:
        """KV tokens of this request's sequence (what its attention reads each decode step)."""
        return self.prompt + self.out

    @property
    def own(self) -> int:
        """Pool tokens charged to this request alone: its sequence minus the shared prefix it
        holds a lock on (charged once, to the radix cache, however many requests share it)."""
        return self.prompt + self.out - self.shared


class Arrivals:
    """Deterministic request source for one scheduler (DP rank)."""

    def __init__(self, load: Load, rng: random.Random, share: float, start: float) -> None:
        self.load, self.rng, self.share = load, rng, share
        self.rate = load.rate * share
        self.next_time = start + self._gap() if self.rate > 0 else float("inf")
        self.clients = int(load.clients * share)
        self.returning = [start + i * 0.002 for i in range(self.clients)]
        self.leaving = 0  # clients to drop when they next get an answer

    def change(self, load: Load, now: float) -> None:
        """Switch to another load at `now` (clients join or leave; the rate changes)."""
        rate = load.rate * self.share
        if rate != self.rate:
            self.next_time = now + self.rng.expovariate(rate) if rate > 0 else float("inf")
        self.load, self.rate = load, rate
        clients = int(load.clients * self.share)
        delta, self.clients = clients - self.clients, clients
        if delta > 0:
            self.returning += [now + i * 0.002 for i in range(delta)]
            return
        drop = min(-delta, len(self.returning))
        self.returning = sorted(self.returning)[drop:]
        self.leaving += -delta - drop

    def _gap(self) -> float:
        return self.rng.expovariate(self.rate)

    def make(self, at: float) -> Req:
        """Draw one request arriving at `at`."""
        load, rng = self.load, self.rng
        prompt = max(16, int(rng.lognormvariate(0, 0.5) * load.prompt_mean * 0.88))
        group = -1
        if load.shared_prefix_fraction and rng.random() < load.shared_prefix_fraction:
            group = rng.randrange(load.prefix_groups)
            prompt = max(prompt, load.prefix_len + 32)
        target = load.max_new_tokens
        if rng.random() < load.eos_fraction:
            target = max(1, int(rng.random() * (load.eos_max_tokens or load.max_new_tokens)))
        streaming = rng.random() < load.streaming_fraction
        return Req(prompt, load.max_new_tokens, target, at, group, streaming)

    def due(self, now: float) -> list[Req]:
        """Every request that has arrived by `now`, in arrival order."""
        out: list[Req] = []
        while self.next_time <= now:
            out.append(self.make(self.next_time))
            self.next_time += self._gap()
        if self.returning:
            ready = [t for t in self.returning if t <= now]
            self.returning = [t for t in self.returning if t > now]
            out.extend(self.make(t) for t in sorted(ready))
        return out

    def next_after(self) -> float:
        """Time of the next arrival already known."""
        return min([self.next_time, *self.returning])

    def client_returns(self, at: float) -> None:
        """A closed-loop client got its answer and sends the next request at `at`."""
        if self.leaving:
            self.leaving -= 1
        elif self.load.clients:
            self.returning.append(at)
