"""The KV pool's policies: radix prefix cache, retraction choice and the per-version rules."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .catalogue import Version
from .workload import Req

RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS (global_config.retract_decode_steps)
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
# new_token_ratio: SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR,
# SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS (global_config.py 0.4.10, environ.py 0.5.x): same defaults in
# every version served.
INIT_RATIO, MIN_RATIO_FACTOR, DECAY_STEPS = 0.7, 0.14, 600


@dataclass(frozen=True)
class SchedulerRules:
    """Where the scheduler's arithmetic differs between the versions served."""

    retract_room_steps: int  # retract until the kept batch has room for this many steps
    ratio_plus_one: bool  # the new ratio divides by sum(max_new_tokens) + 1
    charge_remaining: bool  # a new request reserves max_new - output (not max_new)
    page_overhead: int  # tokens added to a new request's reservation


def rules_for(version: Version) -> SchedulerRules:
    """0.4.10: ScheduleBatch.retract_decode keeps room for 20 steps per request and divides by
    sum(max_new); PrefillAdder.add_one_req reserves min(max_new, CLIP). 0.5.9: retraction stops
    once the next step fits (check_decode_mem on the kept requests), the ratio divides by sum + 1
    (NewTokenRatioTracker.estimate_new_token_ratio_after_retract from 0.5.17), the reservation is
    min(max_new - output, CLIP). 0.5.17: plus one page per request."""
    if version < (0, 5, 0):
        return SchedulerRules(RETRACT_DECODE_STEPS, False, False, 0)
    return SchedulerRules(1, True, True, 1 if version >= (0, 5, 17) else 0)


def ratio_bounds(conservativeness: float) -> tuple[float, float, float]:
    """(init, min, per-step decay) as Scheduler.__init__ (0.4.10, 0.5.9) and
    NewTokenRatioTracker.from_server_args (0.5.17) / from_config (0.5.23) compute them."""
    init = min(INIT_RATIO * conservativeness, 1.0)
    low = min(init * MIN_RATIO_FACTOR, 1.0)
    return init, low, (init - low) / DECAY_STEPS


class PrefixCache:
    """The radix cache's shared prefixes (LRU, ref-counted) and finished sequences.

    A prefix that running requests use is locked (SGLang's inc_lock_ref on the tree node): it is
    charged to the pool once, however many requests share it, and cannot be evicted. When the
    last holder finishes or is retracted it becomes evictable and stays cached until the pool
    needs the room. `prefix_tokens` counts the evictable (unlocked) prefixes only.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.groups: OrderedDict[int, int] = OrderedDict()
        self.refs: dict[int, int] = {}
        self.locked_tokens = 0  # prefixes some request holds (charged to the pool's used part)
        self.prefix_tokens = 0
        self.finished_tokens = 0

    def hit(self, group: int) -> int:
        """Cached prefix length for a request of this prefix group (0 on a miss)."""
        return self.groups.get(group, 0)

    def lock_cost(self, group: int) -> int:
        """Pool tokens that locking this group's cached prefix takes from the evictable part."""
        return self.groups.get(group, 0) if not self.refs.get(group) else 0

    def acquire(self, group: int, size: int) -> int:
        """A running request now uses this group's prefix (inserted if new): lock it.

        Returns the pool tokens newly charged: the prefix's size for its first holder, else 0.
        """
        if group < 0 or not self.enabled:
            return 0
        refs = self.refs.get(group, 0)
        self.refs[group] = refs + 1
        if group not in self.groups:
            self.groups[group] = size
        elif not refs:
            self.prefix_tokens -= self.groups[group]
        self.groups.move_to_end(group)
        if refs:
            return 0
        self.locked_tokens += self.groups[group]
        return self.groups[group]

    def release(self, group: int) -> int:
        """A holder is done with this group's prefix; returns the tokens no longer locked."""
        refs = self.refs.get(group, 0) - 1
        if refs > 0:
            self.refs[group] = refs
            return 0
        self.refs.pop(group, None)
        size = self.groups.get(group, 0)
        self.locked_tokens -= size
        self.prefix_tokens += size
        self.groups.move_to_end(group)  # most recently used
        return size

    def finished(self, tokens: int) -> None:
        """A finished request's own tokens stay in the tree (evictable) unless the cache is off."""
        if self.enabled:
            self.finished_tokens += tokens

    def evict(self, room: int) -> int:
        """Keep at most `room` evictable tokens (the part of the pool nothing running holds).

        Returns the tokens evicted: what SGLang's `evicted_tokens_total` counts (finished
        sequences' tokens and whole prefixes alike, RadixCache.evict)."""
        kept = min(self.finished_tokens, max(room - self.prefix_tokens, 0))
        evicted, self.finished_tokens = self.finished_tokens - kept, kept
        if self.prefix_tokens <= room:
            return evicted
        for group in [g for g in self.groups if not self.refs.get(g)]:  # least recent first
            size = self.groups.pop(group)
            self.prefix_tokens -= size
            evicted += size
            if self.prefix_tokens <= room:
                break
        return evicted

    def evictable(self, room: int) -> int:
        """kv_evictable_tokens: cached tokens that fit in the free part of the pool."""
        return min(room, self.prefix_tokens + self.finished_tokens)


def pending_output(reqs: list[Req]) -> int:
    """Sum of min(max_new - out, CLIP): what admission multiplies by new_token_ratio."""
    return sum(min(r.max_new - r.out, CLIP_MAX_NEW_TOKENS) for r in reqs)


def choose_retracted(running: list[Req], free: int, room_steps: int) -> tuple[list[Req], list[Req]]:
    """(kept, retracted), as ScheduleBatch.retract_decode: keep the most-decoded requests (ties:
    shortest prompt), retract at least one, then until the kept ones have room for `room_steps`
    more tokens each; always keep one."""
    order = sorted(running, key=lambda r: (r.out, -r.prompt), reverse=True)
    gone: list[Req] = []
    while len(order) > 1 and (not gone or free < len(order) * room_steps):
        req = order.pop()
        free += req.own
        gone.append(req)
    return order, gone


def ratio_after_retract(kept: list[Req], plus_one: bool) -> float:
    """The new new_token_ratio: (decoded + 20 per request) / sum(max_new) over the KEPT batch."""
    decoded = sum(r.out for r in kept) + RETRACT_DECODE_STEPS * len(kept)
    total = sum(r.max_new for r in kept) + (1 if plus_one else 0)
    return min(1.0, decoded / max(total, 1))
