"""SGLang's command-line flags per version: spellings, renames, accepted values, and units.

Read from `python/sglang/srt/server_args.py` (`ServerArgs.add_cli_args`; from 0.5.14 the
`Annotated` fields, from 0.5.20 `arg_groups/fields/*.py`) of each release. Versions are
first releases that had the change; "0.0.0" means every release checked (0.4.3 on).
"""

from dataclasses import dataclass

from sglang_tuner.model.flag_transforms import ranks_sharing, read, write
from sglang_tuner.model.flags import MAX_RUNNING_REQUESTS, SCHEDULE_CONSERVATIVENESS
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.rules.sglang.versions import in_span

ALL = "0.0.0"


@dataclass(frozen=True, slots=True)
class Spelling:
    """One spelling of a setting and the versions whose parser accepts it."""

    name: str
    since: str = ALL
    until: str | None = None  # first version that rejects it
    deprecated: str | None = None  # from here on it only warns, or is a no-op
    instead: str = ""  # what the deprecation warning points to


# Setting (its classic flag) -> spellings, oldest first.
_RENAMED: dict[str, tuple[Spelling, ...]] = {
    # 0.5.14 (CudaGraphConfig refactor): field cuda_graph_max_bs_decode; the old flag became a
    # DeprecatedAliasStoreAction. 0.5.20 dropped the deprecated registrations; argparse prefix
    # matching then finds the old spelling ambiguous (-decode, -prefill) and exits.
    "--cuda-graph-max-bs": (
        Spelling("--cuda-graph-max-bs", until="0.5.20", deprecated="0.5.14",
                 instead="--cuda-graph-max-bs-decode"),
        Spelling("--cuda-graph-max-bs-decode", since="0.5.14"),
    ),
    # Prefill (piecewise) CUDA graphs: opt-in store_true from 0.5.3.post2; on by default from
    # 0.5.10 (the flag became a no-op DeprecatedAction, `_handle_piecewise_cuda_graph`
    # auto-disables it for DP attention, torch.compile, pp > 1, VLMs, LoRA, ...); gone in 0.5.14.
    "--enable-piecewise-cuda-graph": (
        Spelling("--enable-piecewise-cuda-graph", since="0.5.3.post2", until="0.5.14",
                 deprecated="0.5.10", instead="on by default"),
    ),
    "--disable-piecewise-cuda-graph": (
        Spelling("--disable-piecewise-cuda-graph", since="0.5.10", until="0.5.20",
                 deprecated="0.5.14", instead="--cuda-graph-backend-prefill disabled"),
        Spelling("--cuda-graph-backend-prefill", since="0.5.14"),
    ),
    # 0.5.14: DeprecatedStoreTrueAction, still disables both phases (no_cli field from 0.5.20).
    "--disable-cuda-graph": (
        Spelling("--disable-cuda-graph", deprecated="0.5.14",
                 instead="--cuda-graph-backend-decode disabled"),
    ),
    "--enable-metrics-for-all-schedulers": (
        Spelling("--enable-metrics-for-all-schedulers", since="0.4.9.post3"),
    ),
    # 0.5.22: no_cli field, DeprecatedStoreTrueAction; `handle_deprecated_dp_attention` turns
    # `--dp-size N --enable-dp-attention` into `--attn-dp-size N` with dp_size 1.
    "--enable-dp-attention": (
        Spelling("--enable-dp-attention", deprecated="0.5.22",
                 instead="--attn-dp-size <dp-size> instead of --dp-size <dp-size>"),
    ),
    "--attn-dp-size": (Spelling("--attn-dp-size", since="0.5.22"),),
    "--prefill-attention-backend": (Spelling("--prefill-attention-backend", since="0.4.9.post5"),),
    "--decode-attention-backend": (Spelling("--decode-attention-backend", since="0.4.9.post5"),),
}  # fmt: skip
# Unchanged in every release checked (0.4.3 to 0.5.23).
STABLE_FLAGS = (
    "--max-running-requests", "--chunked-prefill-size", "--max-prefill-tokens",
    "--enable-torch-compile", "--torch-compile-max-bs", "--schedule-conservativeness",
    "--mem-fraction-static", "--attention-backend", "--kv-cache-dtype", "--schedule-policy",
    "--quantization", "--tp-size", "--dp-size", "--enable-metrics", "--disable-radix-cache",
    "--enable-hierarchical-cache",
)  # fmt: skip
SPELLINGS: dict[str, tuple[Spelling, ...]] = {
    **_RENAMED,
    **{flag: (Spelling(flag),) for flag in STABLE_FLAGS},
}
# Long spellings argparse takes too, in every release that has the short one.
_ALIASES = {
    "--tp-size": ("--tensor-parallel-size",),
    "--dp-size": ("--data-parallel-size",),
    "--attn-dp-size": ("--attention-data-parallel-size",),
}
_SETTING_OF = {
    **{s.name: key for key, spellings in SPELLINGS.items() for s in spellings},
    **{alias: key for key, aliases in _ALIASES.items() for alias in aliases},
}

# Flag -> value -> (first version, first version without it). Values not listed: unknown.
VALUES: dict[str, dict[str, tuple[str, str | None]]] = {
    "--attention-backend": {
        "triton": (ALL, None), "torch_native": (ALL, None), "flashinfer": (ALL, None),
        "fa3": ("0.4.4.post2", None), "flashmla": ("0.4.5.post2", None),
        "cutlass_mla": ("0.4.6.post1", "0.5.20"), "aiter": ("0.4.6.post5", None),
        "trtllm_mla": ("0.5.0", None), "trtllm_mha": ("0.5.0", None),
        "fa4": ("0.5.3", None), "nsa": ("0.5.3", None), "flex_attention": ("0.5.3", None),
        "dsv4": ("0.5.12", None), "tokenspeed_mla": ("0.5.12", None),
        "dsa": ("0.5.13", None), "cutedsl_mla": ("0.5.13", None),
    },
    "--kv-cache-dtype": {
        "auto": (ALL, None), "fp8_e5m2": (ALL, None), "fp8_e4m3": (ALL, None),
        "bf16": ("0.5.4.post1", None), "bfloat16": ("0.5.4.post1", None),
        "fp4_e2m1": ("0.5.4.post3", "0.5.21"),
        "mxfp8": ("0.5.16", None), "nvfp4": ("0.5.16", None), "fp4_mx_block16": ("0.5.16", None),
    },
    "--schedule-policy": {
        "lpm": (ALL, None), "random": (ALL, None), "fcfs": (ALL, None),
        "dfs-weight": (ALL, None), "lof": ("0.5.0", None), "priority": ("0.5.3", None),
        "routing-key": ("0.5.8", None), "hrrn": ("0.5.20", None),
        "shortest-prefill-first": ("0.5.21", None),
    },
    "--quantization": {"fp8": (ALL, None)},
}  # fmt: skip


def _accepts(spelling: Spelling, version: str | None) -> bool:
    """True when this version's parser takes the spelling (deprecated ones too)."""
    return in_span(version, spelling.since, spelling.until)


def _is_current(spelling: Spelling, version: str | None) -> bool:
    """Accepted and not deprecated in this version."""
    return _accepts(spelling, version) and not (
        spelling.deprecated and in_span(version, spelling.deprecated)
    )


def flag_name(flag: str, version: str | None) -> str | None:
    """The spelling to advise for a setting on this version, given any of its spellings.

    `flag_name("--cuda-graph-max-bs", "0.5.17")` -> "--cuda-graph-max-bs-decode". None when the
    version has no current spelling: not yet added, removed, or only a deprecated alias left
    (then `flag_replacement` says what to use). An unknown version gets the newest spelling.
    """
    setting = _SETTING_OF.get(flag)
    if setting is None:
        return None
    current = [s.name for s in SPELLINGS[setting] if _is_current(s, version)]
    return current[-1] if current else None


def spelling_note(flag: str, version: str | None) -> str:
    """Where the server's version is unknown and the setting was spelled otherwise before
    (`--cuda-graph-max-bs` until 0.5.14), what older releases take; else ""."""
    setting = _SETTING_OF.get(flag)
    if version is not None or setting is None:
        return ""
    older = [s for s in SPELLINGS[setting] if s.name != flag and s.name == setting]
    newest = next((s for s in SPELLINGS[setting] if s.name == flag), None)
    if not older or newest is None or newest.since == ALL:
        return ""
    return (
        f"the server's SGLang version is unknown: {flag} is the spelling from {newest.since}; "
        f"older releases take {older[0].name}"
    )


def has_flag(flag: str, version: str | None) -> bool:
    """True when advice may name this setting for this version (some current spelling)."""
    return flag_name(flag, version) is not None


def accepts_flag(spelling: str, version: str | None) -> bool | None:
    """Whether this exact spelling still parses (deprecated aliases too); None if not tabled."""
    setting = _SETTING_OF.get(spelling)
    if setting is None:
        return None
    return any(s.name == spelling and _accepts(s, version) for s in SPELLINGS[setting])


def flag_replacement(flag: str, version: str | None) -> str:
    """What this version wants instead of a spelling it deprecated or removed; else ""."""
    setting = _SETTING_OF.get(flag)
    if setting is None:
        return ""
    spelling = next(s for s in SPELLINGS[setting] if s.name == flag)
    retired = spelling.deprecated or spelling.until
    if retired is None or not in_span(version, retired):
        return ""
    return flag_name(flag, version) or spelling.instead


def accepts_value(flag: str, value: str, version: str | None) -> bool | None:
    """Whether the version's flag takes this value; None when the value is not tabled."""
    span = VALUES.get(_SETTING_OF.get(flag, flag), {}).get(value)
    if span is None:
        return None
    return has_flag(flag, version) and in_span(version, *span)


def user_set_flag(config: ServerConfig, flag: str) -> bool | None:
    """Whether the launch command named the setting (any spelling or alias).

    From `/server_info.launch_command` (SGLang >= 0.5.20, `ServerArgs.launch_command`). None for
    older servers, with a `--config` file, and when an abbreviation (argparse takes unique
    prefixes such as "--mem-frac") may stand for it.
    """
    command = config.raw.get("launch_command")
    setting = _SETTING_OF.get(flag)
    if not isinstance(command, str) or setting is None:
        return None
    names = {s.name for s in SPELLINGS[setting]} | set(_ALIASES.get(setting, ()))
    given = [t.split("=", 1)[0] for t in command.split() if t.startswith("--")]
    if any(name in names for name in given):
        return True
    abbreviated = [g for g in given if g not in _SETTING_OF and any(n.startswith(g) for n in names)]
    return None if "--config" in given or abbreviated else False


# How SGLang transforms a flag's value (attention DP) is `model/flag_transforms.py`'s table;
# these names read it.
def conservativeness_scale(config: ServerConfig | None) -> float:
    """What SGLang multiplies --schedule-conservativeness by before scheduling with it."""
    if config is None:
        return 1.0
    return write(SCHEDULE_CONSERVATIVENESS, 1.0, config)


def max_running_is_per_rank(config: ServerConfig) -> bool | None:
    """Whether `--max-running-requests N` caps each DP rank at N (else N is split over them).

    Plain `--dp-size` replicas each get the full value (`data_parallel_controller.py` passes
    the same server args); DP attention divides it (`model/flag_transforms.TRANSFORMS`).
    """
    if config.attention_dp_size() is None:
        return None
    return ranks_sharing(MAX_RUNNING_REQUESTS, config) == 1


def max_running_flag_value(per_rank: int, config: ServerConfig) -> int | None:
    """The `--max-running-requests` value that gives each DP rank `per_rank` slots."""
    if config.attention_dp_size() is None:
        return None
    return int(read(MAX_RUNNING_REQUESTS, per_rank, config))
