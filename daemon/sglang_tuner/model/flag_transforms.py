"""The one table of how SGLang transforms a flag between the command line and what it runs and
reports, per version, and the two directions that use it.

READ: a value `/server_info` or the log's launch line (`server_args=ServerArgs(...)`) reports
-> the flag value the operator typed (`read`, `read_config`). WRITE: a flag value advice asks
for -> what the server will run and report (`write`). Everything in `ServerConfig` is in flag
units after `read_config` (the readers call it), so rules, the planner and the change log speak
the command line's units; `write` gives the per-rank value a rule reasons about.

Read from each release's wheel (0.4.0 - 0.5.23): `srt/server_args.py` (`__post_init__`,
`_handle_data_parallelism` from 0.5.9), `srt/arg_groups/parallel_hook.py` (0.5.19+), and the
per-rank request cap (`managers/tp_worker.py`, `model_executor/model_runner.py` 0.5.7,
`model_runner_kv_cache_mixin.py` 0.5.10, `mem_cache/kv_cache_configurator.py` 0.5.16+). How a
version spells a flag and which values it accepts: `rules/sglang/flags.py`.
"""

from dataclasses import dataclass, replace
from typing import Final, Literal

from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.versions import in_span

# Kinds of transform.
SCALE: Final = "scale"  # reported = flag x factor
SPLIT: Final = "split"  # reported = flag // divisor (-1, chunking off, stays -1)
PER_RANK: Final = "per_rank"  # reported as typed; each attention-DP rank runs flag // width
CLAMP: Final = "clamp"  # reported = min(flag, factor): above it the flag cannot be read back
Kind = Literal["scale", "split", "per_rank", "clamp"]
WIDTH: Final = 0.0  # a divisor of "the attention-DP width" (dp_size, or attn_dp_size 0.5.22+)


@dataclass(frozen=True, slots=True)
class Transform:
    """One row: under attention DP, in versions [since, until), SGLang turns `flag` so."""

    flag: str  # classic spelling (model/flags.py)
    field: str  # the `ServerConfig` field (and /server_info key) holding it
    kind: Kind
    factor: float  # the scale, the divisor (WIDTH: the attention-DP width), or the clamp
    since: str
    until: str | None
    where: str  # SGLang's code that does it


# Oldest first per flag. Every row applies only while attention DP is on (`dp_attention_on`).
TRANSFORMS: tuple[Transform, ...] = (
    # 0.4.0 server_args.py: `schedule_conservativeness * 0.3` when enable_dp_attention;
    # 0.5.9 `_handle_data_parallelism`; 0.5.19-0.5.23 arg_groups/parallel_hook.py.
    Transform("--schedule-conservativeness", "schedule_conservativeness", SCALE, 0.3,
              "0.4.0", None, "server_args.py; arg_groups/parallel_hook.py (0.5.19+)"),
    # 0.4.0-0.4.4 server_args.py: `chunked_prefill_size // 2` (dp_size forced to tp_size).
    Transform("--chunked-prefill-size", "chunked_prefill_size", SPLIT, 2,
              "0.4.0", "0.4.4.post1", "server_args.py"),
    # 0.4.4.post1 server_args.py: `// self.dp_size`; 0.4.10 server_args.py; 0.5.22-0.5.23
    # arg_groups/parallel_hook.py `// cfg.attn_dp_size`.
    Transform("--chunked-prefill-size", "chunked_prefill_size", SPLIT, WIDTH,
              "0.4.4.post1", None, "server_args.py; arg_groups/parallel_hook.py (0.5.19+)"),
    # 0.4.1.post7 tp_worker.py: `max_running_requests // (dp_size if enable_dp_attention
    # else 1)`; 0.5.7 model_runner.py; 0.5.10 model_runner_kv_cache_mixin.py; 0.5.16-0.5.23
    # mem_cache/kv_cache_configurator.py `// attn_dp_size`. Before 0.4.1.post7 every rank
    # took the whole flag. /server_info reports the flag as typed and, from 0.5.8,
    # `internal_states[].effective_max_running_requests_per_dp` (then cut to the slots, 0.5.10+).
    Transform("--max-running-requests", "max_running_requests", PER_RANK, WIDTH,
              "0.4.1.post7", None, "managers/tp_worker.py; mem_cache/kv_cache_configurator.py"),
    # 0.4.0-0.4.0.post1 server_args.py: `cuda_graph_max_bs = min(cuda_graph_max_bs, 96)`.
    Transform("--cuda-graph-max-bs", "cuda_graph_max_bs", CLAMP, 96,
              "0.4.0", "0.4.0.post2", "server_args.py"),
)  # fmt: skip
# Renamed fields a reader looks for, newest first: (flag, /server_info keys, since, where).
# The flag spellings themselves (--cuda-graph-max-bs-decode from 0.5.14, --attn-dp-size from
# 0.5.22) are rules/sglang/flags.py's `SPELLINGS`.
RENAMED_FIELDS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("--cuda-graph-max-bs", ("cuda_graph_config.decode.max_bs", "cuda_graph_max_bs_decode"),
     "0.5.14", "server_args.py CudaGraphConfig (0.5.14)"),
    ("--cuda-graph-max-bs", ("cuda_graph_max_bs",), "0.4.0", "server_args.py"),
    # 0.5.22 arg_groups/parallel_hook.py `handle_deprecated_dp_attention`: `--dp-size N
    # --enable-dp-attention` becomes attn_dp_size N with dp_size 1.
    ("--attn-dp-size", ("attn_dp_size",), "0.5.22", "arg_groups/parallel_hook.py"),
    ("--attn-dp-size", ("dp_size",), "0.4.0", "server_args.py (with enable_dp_attention)"),
)  # fmt: skip
# Before this release enable_dp_attention alone turned DP attention on (dp_size forced to
# tp_size, 0.4.0-0.4.4 server_args.py); from it on, only with more than one attention-DP rank
# (an assert, then 0.5.9 `_handle_data_parallelism` turns it off at dp_size 1).
WIDTH_DECIDES = "0.4.4.post1"


def reported_fields(flag: str) -> tuple[str, ...]:
    """Where `/server_info` holds a renamed setting, newest first (dots: nested keys)."""
    return tuple(key for name, keys, _, _ in RENAMED_FIELDS if name == flag for key in keys)


def transform_of(flag: str, version: str | None) -> Transform | None:
    """The row that applies to this flag in this version (None: SGLang keeps it as typed)."""
    setting = "--cuda-graph-max-bs" if flag == "--cuda-graph-max-bs-decode" else flag
    rows = [t for t in TRANSFORMS if t.flag == setting and in_span(version, t.since, t.until)]
    return rows[-1] if rows else None


def dp_attention_on(config: ServerConfig) -> bool | None:
    """Whether the server runs attention DP, as the version decides it; None if unknown."""
    if not in_span(config.version, WIDTH_DECIDES):
        return config.enable_dp_attention
    width = config.attention_dp_size()
    return None if width is None else width > 1


def _divisor(row: Transform, config: ServerConfig) -> int:
    width = config.attention_dp_size() or 1
    return max(1, width if row.factor == WIDTH else int(row.factor))


def write(flag: str, value: float, config: ServerConfig) -> float:
    """What SGLang runs (and reports, or a rank takes) for `--flag value` on this server."""
    row = transform_of(flag, config.version)
    if row is None or not dp_attention_on(config):
        return value
    if row.kind == SCALE:
        return value * row.factor
    if row.kind == CLAMP:
        return min(value, row.factor)
    if row.kind == SPLIT and value < 0:
        return value  # -1: chunking off, on every rank
    return int(value) // _divisor(row, config)


def read(flag: str, reported: float, config: ServerConfig) -> float:
    """The flag value that gives `reported` on this server: the smallest one, where SGLang's
    integer division makes several give it (`write(read(x)) == x` for every reported x).
    A clamped value at its clamp is read as the clamp (the flag may have been higher)."""
    row = transform_of(flag, config.version)
    if row is None or not dp_attention_on(config):
        return reported
    if row.kind == SCALE:
        return round(reported / row.factor, 6)
    if row.kind == CLAMP or (row.kind == SPLIT and reported < 0):
        return reported
    return int(reported) * _divisor(row, config)


def ranks_sharing(flag: str, config: ServerConfig | None) -> int:
    """How many attention-DP ranks split one value of the flag (1: each takes it whole)."""
    if config is None:
        return 1
    row = transform_of(flag, config.version)
    split = row is not None and row.kind in (SPLIT, PER_RANK) and dp_attention_on(config)
    return _divisor(row, config) if split and row is not None else 1


# The flags SGLang reports transformed (the SCALE and SPLIT rows): `read_config` reads them back.
_CONS, _CHUNK = "--schedule-conservativeness", "--chunked-prefill-size"


def read_config(config: ServerConfig) -> ServerConfig:
    """A config as SGLang reported it, with every transformed value read back to flag units:
    the value the launch command typed where the server says it (0.5.20+ `launch_command`),
    else the reading of the reported one; `--max-running-requests` as `max_running_flag`."""
    cons, chunk = config.schedule_conservativeness, config.chunked_prefill_size
    command = config.raw.get("launch_command")
    typed_cons, typed_chunk = (_typed(command, flag) for flag in (_CONS, _CHUNK))
    if cons is not None:
        cons = typed_cons if typed_cons is not None else float(read(_CONS, cons, config))
    if chunk is not None:
        chunk = int(typed_chunk) if typed_chunk is not None else int(read(_CHUNK, chunk, config))
    return replace(
        config,
        schedule_conservativeness=cons,
        chunked_prefill_size=chunk,
        max_running_requests=max_running_flag(config),  # reported: the ranks' caps summed
    )


def _typed(command: object, flag: str) -> float | None:
    """The value a launch command gives `flag` (`--flag V` or `--flag=V`; the last wins), or
    None where it does not name it exactly."""
    if not isinstance(command, str):
        return None
    tokens, value = command.split(), None
    for at, token in enumerate(tokens):
        name, eq, given = token.partition("=")
        if name == flag:
            value = given if eq else (tokens[at + 1] if at + 1 < len(tokens) else None)
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def max_running_flag(config: ServerConfig | None) -> int | None:
    """`--max-running-requests` as typed: the launch value where the server says it, else a
    rank's effective limit times the ranks sharing the flag, else what an older server
    reports (before 0.5.8: the flag's own value)."""
    if config is None:
        return None
    typed = config.raw.get("max_running_requests")
    if isinstance(typed, int) and not isinstance(typed, bool) and typed > 0:
        return typed
    per_rank = config.max_running_requests_per_dp
    if per_rank is None:
        return config.max_running_requests
    return per_rank * ranks_sharing("--max-running-requests", config)


def max_running_per_rank(config: ServerConfig | None) -> int | None:
    """The request cap one DP rank runs with: the server's own per-rank figure, else the
    flag's share (`write`)."""
    if config is None:
        return None
    if config.max_running_requests_per_dp is not None:
        return config.max_running_requests_per_dp
    flag = config.max_running_requests
    return None if flag is None else int(write("--max-running-requests", flag, config))


def split_note(flag: str, value: float, config: ServerConfig | None) -> str:
    """Where SGLang splits the flag over attention-DP ranks: what each rank runs with ('' where
    it takes the value whole), for an advice's note."""
    ranks = ranks_sharing(flag, config)
    if config is None or ranks == 1:
        return ""
    each = write(flag, value, config)
    return f"SGLang splits {flag} over the {ranks} attention-DP ranks: {each:g} each"
