"""The KV pool's policies: radix prefix cache (evictable tokens) and retraction choice."""

from __future__ import annotations

from collections import OrderedDict

from .workload import Req

RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS: room kept for this many decode steps
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION


class PrefixCache:
    """Tokens the radix cache keeps after use: shared prefixes (LRU) and finished sequences."""

    def __init__(self) -> None:
        self.groups: OrderedDict[int, int] = OrderedDict()
        self.prefix_tokens = 0
        self.finished_tokens = 0

    def hit(self, group: int) -> int:
        """Cached prefix length for a request of this prefix group (0 on a miss)."""
        return self.groups.get(group, 0)

    def touch(self, group: int, size: int) -> None:
        """A request of this group was prefilled: its prefix is now the most recently used."""
        if group < 0:
            return
        if group not in self.groups:
            self.groups[group] = size
            self.prefix_tokens += size
        self.groups.move_to_end(group)

    def evict(self, room: int) -> None:
        """Keep at most `room` tokens (the part of the pool no running request holds)."""
        self.finished_tokens = min(self.finished_tokens, max(room - self.prefix_tokens, 0))
        while self.groups and self.prefix_tokens > room:
            _, size = self.groups.popitem(last=False)
            self.prefix_tokens -= size

    def evictable(self, room: int) -> int:
        """kv_evictable_tokens: cached tokens that fit in the free part of the pool."""
        return min(room, self.prefix_tokens + self.finished_tokens)


def pending_output(reqs: list[Req]) -> int:
    """Sum of min(max_new - out, CLIP): what admission multiplies by new_token_ratio."""
    return sum(min(r.max_new - r.out, CLIP_MAX_NEW_TOKENS) for r in reqs)


def choose_retracted(running: list[Req], free: int) -> tuple[list[Req], list[Req]]:
    """(kept, retracted): retract fewest-output, longest-input requests first, as SGLang does,
    until the kept batch has room for RETRACT_DECODE_STEPS more steps."""
    order = sorted(running, key=lambda r: (r.out, -r.prompt), reverse=True)
    gone: list[Req] = []
    while len(order) > 1 and free < len(order) * RETRACT_DECODE_STEPS:
        req = order.pop()
        free += req.held
        gone.append(req)
    return order, gone


def ratio_after_retract(gone: list[Req]) -> float:
    """SGLang's new_token_ratio estimate after a retraction."""
    decoded = sum(r.out for r in gone)
    return min(
        1.0, (decoded + RETRACT_DECODE_STEPS * len(gone)) / (sum(r.max_new for r in gone) + 1)
    )
