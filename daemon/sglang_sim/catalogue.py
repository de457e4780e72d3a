"""Which metric families each simulated SGLang version exposes, read from SGLang's collectors.

The families themselves are listed in `catalogue_families.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalogue_families import FAMILY_TABLE

Version = tuple[int, ...]
VERSIONS: tuple[str, ...] = ("0.4.10", "0.5.9", "0.5.17", "0.5.23")
NEVER: Version = (99,)

# fmt: off
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06,
               0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_OLD = (*TTFT_BUCKETS, 800)
E2E_NEW = (*TTFT_BUCKETS, 600, 1200, 1800, 2400)
_QUEUE_TAIL = (1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500,
               600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)
QUEUE_OLD = (0.0, 0.1, 0.2, 0.5, *_QUEUE_TAIL)
QUEUE_NEW = (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, *_QUEUE_TAIL)
STAGE_BUCKETS = tuple(0.001 * 1.62**i for i in range(30))
TOKEN_BUCKETS = (100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000,
                 10000, 12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000,
                 60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000)
# fmt: on
BUCKETS = {
    "ttft": TTFT_BUCKETS,
    "itl": ITL_BUCKETS,
    "e2e_old": E2E_OLD,
    "e2e_new": E2E_NEW,
    "queue_old": QUEUE_OLD,
    "queue_new": QUEUE_NEW,
    "stage": STAGE_BUCKETS,
    "tokens": TOKEN_BUCKETS,
    "-": (),
}


def parse_version(text: str) -> Version:
    """Turn '0.5.9' into (0, 5, 9)."""
    return tuple(int(part) for part in text.split("."))


@dataclass(frozen=True)
class Family:
    """One metric family: registered name, type, HELP, where its values live, when it exists.

    scope: sched (one series set per DP rank), pid (sched + pid label), tp (once per TP rank),
    cache (the radix cache's collector: its own labels), tok (tokenizer process), plain (no
    labels), component, http, info.
    """

    name: str
    kind: str
    help: str
    scope: str = "sched"
    since: Version = (0,)
    until: Version = NEVER
    extra: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()

    def present_in(self, version: Version) -> bool:
        """True when this version defines the family."""
        return self.since <= version < self.until


def _version(text: str, default: Version) -> Version:
    return default if text == "-" else parse_version(text)


def _parse(table: str) -> tuple[Family, ...]:
    lines = [line for line in table.splitlines() if line.strip()]
    families = []
    for row, help_line in zip(lines[::2], lines[1::2], strict=True):
        name, kind, scope, since, until, buckets, extra = row.split()
        labels = tuple(extra.split(",")) if extra != "-" else ()
        span = (_version(since, (0,)), _version(until, NEVER))
        families.append(
            Family(name, kind, help_line.strip(), scope, *span, labels, BUCKETS[buckets])
        )
    return tuple(families)


FAMILIES: tuple[Family, ...] = _parse(FAMILY_TABLE)

# Tokenizer-side families that gained the is_streaming label in v0.5.17.
STREAMING_LABELLED = frozenset(
    {
        "prompt_tokens_total",
        "generation_tokens_total",
        "num_requests_total",
        "time_to_first_token_seconds",
        "e2e_request_latency_seconds",
        "request_time_per_output_token_seconds",
    }
)
STREAMING_SINCE: Version = (0, 5, 17)


def families_for(version: Version) -> tuple[Family, ...]:
    """The families one version defines, in exposition order."""
    return tuple(f for f in FAMILIES if f.present_in(version))
