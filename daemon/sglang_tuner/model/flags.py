"""The one table of tuning flags: each flag's `ServerConfig` field, whether a change log tracks
it, which crashes blame its value; and each flag's history on one server (safe and failing).

Every other mapping of flag names is derived from `TUNING_FLAGS`: the planner's flag -> field,
the change log's field -> flag, a crash's blamed fields. Per-version spellings and accepted
values are SGLang's facts and live in `rules/sglang/flags.py`, keyed by the classic spelling
used here.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from sglang_tuner.model.signals import (
    CUDA_GRAPH_CAPTURE_OOM_EVENTS,
    DECODE_OOM_EVENTS,
    KV_POOL_EXHAUSTED_EVENTS,
    PREFILL_OOM_EVENTS,
    STARTUP_NOT_ENOUGH_MEMORY_EVENTS,
)

SCHEDULE_CONSERVATIVENESS = "--schedule-conservativeness"
MEM_FRACTION_STATIC = "--mem-fraction-static"
CHUNKED_PREFILL_SIZE = "--chunked-prefill-size"
MAX_RUNNING_REQUESTS = "--max-running-requests"
CUDA_GRAPH_MAX_BS = "--cuda-graph-max-bs"
SCHEDULE_POLICY = "--schedule-policy"
ATTENTION_BACKEND = "--attention-backend"


@dataclass(frozen=True, slots=True)
class TuningFlag:
    """One tuning flag: its classic spelling, the `ServerConfig` field holding its value, and
    who reads it.

    A change log compares the flag as set (`changes/record.py`: `--max-running-requests` in
    the command line's units, not SGLang's per-DP-rank value). `blamed_by`: the crash signals
    that blame this flag's value, each with whether the crash says the value was too low rather
    than too high.
    """

    flag: str
    field: str
    aliases: tuple[str, ...] = ()  # other spellings of one setting (renames across versions)
    tracked: bool = True  # a change of it is a change of tuning flags, judged by a verdict
    # A change of it makes the window before the restart another configuration's, and its
    # value is remembered as safe or failing (torch.compile and the radix cache: logged only).
    reconfigures: bool = True
    blamed_by: tuple[tuple[str, bool], ...] = ()


# SGLang's own pool running out blames a pool that was too small as much as a batch that was
# too large; a start that found no memory for the pool blames a fraction that was too low.
TUNING_FLAGS: tuple[TuningFlag, ...] = (
    TuningFlag(SCHEDULE_CONSERVATIVENESS, "schedule_conservativeness"),
    TuningFlag(
        MEM_FRACTION_STATIC,
        "mem_fraction_static",
        # too low: the pool ran out or did not fit; too high: the GPU itself ran out of memory
        blamed_by=(
            (KV_POOL_EXHAUSTED_EVENTS, True),
            (STARTUP_NOT_ENOUGH_MEMORY_EVENTS, True),
            (PREFILL_OOM_EVENTS, False),
            (DECODE_OOM_EVENTS, False),
            (CUDA_GRAPH_CAPTURE_OOM_EVENTS, False),
        ),
    ),
    TuningFlag(
        CHUNKED_PREFILL_SIZE, "chunked_prefill_size", blamed_by=((PREFILL_OOM_EVENTS, False),)
    ),
    TuningFlag(
        MAX_RUNNING_REQUESTS,
        "max_running_requests",
        blamed_by=((DECODE_OOM_EVENTS, False), (KV_POOL_EXHAUSTED_EVENTS, False)),
    ),
    TuningFlag(
        CUDA_GRAPH_MAX_BS,
        "cuda_graph_max_bs",
        aliases=("--cuda-graph-max-bs-decode",),  # the v0.5.14+ spelling of the same setting
        blamed_by=((CUDA_GRAPH_CAPTURE_OOM_EVENTS, False),),
    ),
    TuningFlag("--tp-size", "tp_size"),
    TuningFlag("--dp-size", "dp_size"),
    TuningFlag(SCHEDULE_POLICY, "schedule_policy"),
    TuningFlag(ATTENTION_BACKEND, "attention_backend"),
    TuningFlag("--kv-cache-dtype", "kv_cache_dtype"),
    TuningFlag("--quantization", "quantization"),
    TuningFlag("--enable-torch-compile", "enable_torch_compile", reconfigures=False),
    TuningFlag("--disable-radix-cache", "disable_radix_cache", reconfigures=False),
    TuningFlag("--enable-hierarchical-cache", "enable_hierarchical_cache"),
)

# Command-line spelling (every alias too) -> `ServerConfig` field.
FLAG_FIELDS: Mapping[str, str] = {
    spelling: f.field for f in TUNING_FLAGS for spelling in (f.flag, *f.aliases)
}
# `ServerConfig` field a change log compares -> command-line flag.
CHANGE_FLAGS: Mapping[str, str] = {f.field: f.flag for f in TUNING_FLAGS if f.tracked}
# The `ServerConfig` fields whose change makes the old window describe another configuration.
RECONFIGURING_FIELDS: tuple[str, ...] = tuple(f.field for f in TUNING_FLAGS if f.reconfigures)
# Crash signal -> the `ServerConfig` fields whose values it blames, each with "too low?".
CRASH_BLAME: Mapping[str, tuple[tuple[str, bool], ...]] = {
    signal: tuple((f.field, low) for f in TUNING_FLAGS for s, low in f.blamed_by if s == signal)
    for signal in dict.fromkeys(s for f in TUNING_FLAGS for s, _ in f.blamed_by)
}


@dataclass(frozen=True, slots=True)
class FlagOutcome:
    """A value one tuning flag had on this server, and how it went."""

    value: float | str
    ts: float  # when it was last seen running safely, or when the server crashed with it
    crash: str | None = None  # the crash signal (e.g. prefill_oom_events); None: ran safely
    too_low: bool = False  # the crash says the value was too low (startup: pool too small)


@dataclass(frozen=True, slots=True)
class FlagHistory:
    """Per `ServerConfig` field: the last value that ran safely and the last one that crashed;
    a value that failed as too low is kept apart (`failing_low`), so a fraction that was too
    small for the KV pool and one that ran the GPU out of memory bound the next suggestion
    from both sides."""

    safe: Mapping[str, FlagOutcome] = field(default_factory=dict)
    failing: Mapping[str, FlagOutcome] = field(default_factory=dict)
    failing_low: Mapping[str, FlagOutcome] = field(default_factory=dict)

    def crashes_with(self, flag: str, value: float | str) -> FlagOutcome | None:
        """The crash a suggested value would repeat: at or past a failing value, either side."""
        name = FLAG_FIELDS.get(flag, flag)
        for failed in (self.failing.get(name), self.failing_low.get(name)):
            if failed is None:
                continue
            if isinstance(failed.value, str) or isinstance(value, str):
                if str(failed.value) == str(value):
                    return failed
                continue
            if value <= failed.value if failed.too_low else value >= failed.value:
                return failed
        return None
