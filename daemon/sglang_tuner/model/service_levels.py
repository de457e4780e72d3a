"""Service levels: what a target promises its users on each objective (TTFT p99, ITL p50 and
ITL p99 at most, tokens/s at least), each workload profile's defaults and whose numbers they
are, which levels apply to a target and where each came from, and what the window measures.

A level comes from the target's own `service_levels` (`set`), else from the profile's levels
in the settings (`set`), else from the built-in defaults below (`default`); any level applied
only because the profile was inferred from the traffic is `inferred`.
"""

from collections.abc import Mapping
from dataclasses import dataclass, fields

from sglang_tuner.model.advice import ITL_P50, ITL_P99, TOKENS, TTFT_P99
from sglang_tuner.model.decode_rate import decode_rate
from sglang_tuner.model.signals import (
    GEN_THROUGHPUT,
    ITL_P50_SECONDS,
    ITL_P99_SECONDS,
    TTFT_P99_SECONDS,
)
from sglang_tuner.model.window import WindowView
from sglang_tuner.model.window_histogram import PREFIX_OF, window_quantile

SET, DEFAULT, INFERRED = "set", "default", "inferred"


@dataclass(frozen=True, slots=True)
class ServiceLevels:
    """Levels as configured: the latencies in seconds (at most), the throughput floor in tokens
    per second (at least); None: not given here."""

    ttft_p99_seconds: float | None = None
    itl_p50_seconds: float | None = None
    itl_p99_seconds: float | None = None
    min_tokens_per_s: float | None = None

    def given(self) -> dict[str, float]:
        """The fields given here: name -> value."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


# The field of each objective's level, and the signal its current value is read from.
LEVEL_FIELDS = {
    TTFT_P99: "ttft_p99_seconds",
    ITL_P50: "itl_p50_seconds",
    ITL_P99: "itl_p99_seconds",
    TOKENS: "min_tokens_per_s",
}
LEVEL_SIGNALS = {
    TTFT_P99: TTFT_P99_SECONDS,
    ITL_P50: ITL_P50_SECONDS,
    ITL_P99: ITL_P99_SECONDS,
    TOKENS: GEN_THROUGHPUT,
}
_OBJECTIVE_OF = {name: objective for objective, name in LEVEL_FIELDS.items()}

# The built-in levels of each profile. Serving people (online, multi-turn chat): MLPerf
# Inference's Server scenario (loadgen/mlperf.conf: llama2-70b, mixtral-8x7b, llama3_1-8b,
# TTFT 2000 ms, TPOT 200 ms or less, at the 99th percentile), and ITL p50 30 ms, the latency
# rule's own number (about 33 tokens/s a stream, faster than people read; MLPerf's interactive
# scenarios ask 30-40 ms of TPOT p99). Long contexts: MLPerf's llama3_1-405b Server scenario
# (prompts up to 128k tokens: TTFT 6000 ms, TPOT 175 ms). A batch job promises no latency, and
# no profile has a throughput floor: that is a number of the deployment, not of the workload.
PROFILE_LEVELS: Mapping[str, ServiceLevels] = {
    "offline": ServiceLevels(min_tokens_per_s=0.0),
    "online": ServiceLevels(2.0, 0.03, 0.2, 0.0),
    "multi_turn": ServiceLevels(2.0, 0.03, 0.2, 0.0),
    "long_context": ServiceLevels(6.0, 0.03, 0.175, 0.0),
}


@dataclass(frozen=True, slots=True)
class Level:
    """One service level applied to a target: the objective, its bound (seconds at most, or
    tokens/s at least) and where it came from (set, default, inferred)."""

    objective: str
    bound: float
    source: str
    configured: bool = True  # given in the settings (False: a built-in default)

    @property
    def is_floor(self) -> bool:
        """A floor (tokens/s at least) rather than a ceiling (a latency at most)."""
        return self.objective == TOKENS

    def met_by(self, value: float) -> bool:
        """Does `value` of the objective's metric meet the level."""
        return value >= self.bound if self.is_floor else value <= self.bound

    def text(self) -> str:
        """'ITL p50 ≤ 30 ms', 'tok/s ≥ 1200'."""
        return f"{self.objective} {self.bound_text()}"

    def bound_text(self) -> str:
        """'≤ 30 ms', '≥ 1200'."""
        if self.is_floor:
            return f"≥ {self.bound:.0f}"
        return f"≤ {self.value_text(self.bound)}"

    def value_text(self, value: float) -> str:
        """A value of the objective's metric in its unit: '62 ms', '2.4 s', '1200 tok/s'."""
        if self.is_floor:
            return f"{value:.0f} tok/s"
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


@dataclass(frozen=True, slots=True)
class AppliedLevels:
    """The service levels a target is judged and planned against, for `profile`."""

    profile: str = ""
    levels: tuple[Level, ...] = ()

    def of(self, objective: str) -> Level | None:
        """The level of `objective`, or None where none applies."""
        return next((level for level in self.levels if level.objective == objective), None)

    def bound(self, objective: str) -> float | None:
        """The bound of `objective`'s level, or None."""
        level = self.of(objective)
        return None if level is None else level.bound


NO_LEVELS = AppliedLevels()


def applied_levels(
    profile: str,
    inferred: bool,
    own: ServiceLevels | None = None,
    by_profile: Mapping[str, ServiceLevels] | None = None,
) -> AppliedLevels:
    """The levels for a target judged as `profile`: its own (`own`), else the profile's from
    the settings (`by_profile`), else the built-in ones; `inferred`: the profile was guessed
    from the traffic, so only the target's own levels count as set."""
    given = {n: (v, SET, True) for n, v in (own.given() if own else {}).items()}
    configured = (by_profile or {}).get(profile)
    for name, value in (configured.given() if configured else {}).items():
        given.setdefault(name, (value, INFERRED if inferred else SET, True))
    builtin = PROFILE_LEVELS.get(profile)
    for name, value in (builtin.given() if builtin else {}).items():
        given.setdefault(name, (value, INFERRED if inferred else DEFAULT, False))
    levels = tuple(
        Level(_OBJECTIVE_OF[name], *given[name]) for name in LEVEL_FIELDS.values() if name in given
    )
    return AppliedLevels(profile, levels)


def measure(view: WindowView) -> dict[str, float]:
    """Each objective's value now, for the objectives the window has: a p99 the window's own
    (its histogram's, `model.window_histogram`) where its samples carry their buckets, else
    the median of its signal over the window; tokens/s the mean rate over the samples that
    decoded, from the generation counter where the server has it (`model.decode_rate`)."""
    out = {}
    rate = decode_rate([r for r in view.rows((GEN_THROUGHPUT,)) if r[GEN_THROUGHPUT] > 0])
    if rate is not None:
        out[TOKENS] = rate
    for objective, signal in LEVEL_SIGNALS.items():
        if objective == TOKENS:
            continue
        prefix = PREFIX_OF.get(signal)
        whole = None if prefix is None else window_quantile(view, prefix, 0.99)
        values = list(view.values(signal))
        if whole is not None:
            out[objective] = whole
        elif values:
            values.sort()
            out[objective] = values[(len(values) - 1) // 2]
    return out
