"""Command-line flags as each SGLang version spells them, applied to a ServerConfig."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from sglang_physics import supported_backends
from sglang_physics.attention import FA3_WITHOUT_MLA

from .catalogue import Version, parse_version
from .hardware import Knobs
from .model import ServerConfig
from .workload import Load

NEVER: Version = (99,)


def _number(
    kind: type, low: float | None = None, high: float | None = None
) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{text} is outside [{low}, {high if high is not None else 'inf'}]")
        return value

    return parse


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("", "true", "1", "yes", "on"):
        return True  # a store_true flag given without a value
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean")


def _choice(*options: str, none: bool = False) -> Callable[[str], str | None]:
    def parse(text: str) -> str | None:
        if none and text.strip().lower() in ("", "none", "null"):
            return None
        if text not in options:
            raise ValueError(f"{text!r} is not one of {', '.join(options)}")
        return text

    return parse


def _optional_int(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none", "null") else _number(int, 1)(text)


def _chunk(text: str) -> int:
    value = int(text)
    if value != -1 and value < 1:
        raise ValueError("must be -1 (disabled) or a positive number of tokens")
    return value


@dataclass(frozen=True)
class Flag:
    """One flag: the Knobs field it sets, its parser, the versions that have it."""

    knob: str
    parse: Callable[[str], Any]
    since: Version = (0,)
    until: Version = NEVER


_POSITIVE = _number(int, 1)
# server_args.py (0.4.10, 0.5.9, 0.5.17) and arg_groups/fields/*.py (0.5.23). --cuda-graph-max-bs
# became --cuda-graph-max-bs-decode in 0.5.14 (kept as a deprecated alias in 0.5.17, gone in
# 0.5.23); --disable-cuda-graph is deprecated in 0.5.23 but still accepted.
FLAGS: Mapping[str, Flag] = {
    "--mem-fraction-static": Flag("mem_fraction_static", _number(float, 0.05, 0.99)),
    "--schedule-conservativeness": Flag("schedule_conservativeness", _number(float, 0.0)),
    "--chunked-prefill-size": Flag("chunked_prefill_size", _chunk),
    "--max-prefill-tokens": Flag("max_prefill_tokens", _POSITIVE),
    "--max-running-requests": Flag("max_running_requests", _optional_int),
    "--cuda-graph-max-bs": Flag("cuda_graph_max_bs", _POSITIVE, until=(0, 5, 23)),
    "--cuda-graph-max-bs-decode": Flag("cuda_graph_max_bs", _POSITIVE, since=(0, 5, 14)),
    "--schedule-policy": Flag("schedule_policy", _choice("fcfs", "lpm")),
    "--tp-size": Flag("tp_size", _number(int, 1, 8)),
    "--tensor-parallel-size": Flag("tp_size", _number(int, 1, 8)),
    "--dp-size": Flag("dp_size", _number(int, 1, 16)),
    "--data-parallel-size": Flag("dp_size", _number(int, 1, 16)),
    "--enable-dp-attention": Flag("enable_dp_attention", _bool),
    "--ep-size": Flag("ep_size", _number(int, 1, 64)),
    "--expert-parallel-size": Flag("ep_size", _number(int, 1, 64)),
    "--decode-log-interval": Flag("decode_log_interval", _POSITIVE),
    "--enable-metrics": Flag("enable_metrics", _bool),
    "--kv-cache-dtype": Flag("kv_cache_dtype", _choice("auto", "fp8_e4m3", "fp8_e5m2")),
    "--quantization": Flag("quantization", _choice("fp8", none=True)),
    "--attention-backend": Flag(
        "attention_backend",
        _choice(
            "fa3", "flashinfer", "triton", "torch_native", "trtllm_mha", "flashmla", "trtllm_mla"
        ),
    ),
    "--enable-torch-compile": Flag("enable_torch_compile", _bool),
    "--torch-compile-max-bs": Flag("torch_compile_max_bs", _POSITIVE),
    "--disable-cuda-graph": Flag("disable_cuda_graph", _bool),
    "--disable-radix-cache": Flag("disable_radix_cache", _bool),
}
_BY_KNOB = {flag.knob: flag for flag in reversed(list(FLAGS.values()))}


def flag_names(version: str) -> list[str]:
    """The flags this SGLang version accepts (of those the simulator models)."""
    v = parse_version(version)
    return [name for name, flag in FLAGS.items() if flag.since <= v < flag.until]


def _lookup(name: str, version: Version) -> Flag:
    if name.startswith("--"):
        flag: Flag | None = FLAGS.get(name)
        if flag is None:
            raise ValueError(f"unknown flag {name}")
        if not flag.since <= version < flag.until:
            raise ValueError(f"{name} is not a flag of SGLang {'.'.join(map(str, version))}")
        return flag
    if name in _BY_KNOB:
        return _BY_KNOB[name]
    raise ValueError(f"unknown flag or Knobs field {name!r}")


def apply_flags(config: ServerConfig, flags: Mapping[str, str]) -> ServerConfig:
    """The config with `flags` applied: {"--schedule-conservativeness": "0.7", ...}.

    Flags are spelled as the config's SGLang version spells them, or as Knobs field names;
    values are strings as on a command line. Raises ValueError naming the first bad one.
    """
    version = parse_version(config.version)
    changes: dict[str, Any] = {}
    for name, text in flags.items():
        flag = _lookup(name, version)
        try:
            changes[flag.knob] = flag.parse(str(text))
        except ValueError as exc:
            raise ValueError(f"{name} {text!r}: {exc}") from None
    config = replace(config, knobs=replace(config.knobs, **changes))
    check_hardware(config)
    return config


def check_hardware(config: ServerConfig) -> None:
    """Raise ValueError for flags SGLang refuses on this GPU or layout."""
    knobs, gpu = config.knobs, config.gpu
    backend = knobs.attention_backend
    if backend and backend not in supported_backends(gpu):
        choices = ", ".join(supported_backends(gpu))
        raise ValueError(f"--attention-backend {backend} does not run on {gpu.name} ({choices})")
    if backend == "fa3" and config.llm.is_mla and gpu.arch in FA3_WITHOUT_MLA:
        raise ValueError(f"--attention-backend fa3 runs MLA models only on SM90, not {gpu.name}")
    if knobs.enable_dp_attention and knobs.tp_size % knobs.dp_size:
        raise ValueError("--enable-dp-attention needs --tp-size divisible by --dp-size")


def apply_load(load: Load, values: Mapping[str, object]) -> Load:
    """The load with fields replaced: {"clients": 1800} (strings or numbers)."""
    kinds = {f.name: f.type for f in fields(Load)}
    changes: dict[str, Any] = {}
    for name, raw in values.items():
        if name not in kinds:
            raise ValueError(f"unknown Load field {name!r}; one of {', '.join(kinds)}")
        kind = int if kinds[name] in (int, "int") else float
        value = _load_value(raw, kind)
        if value is None:
            raise ValueError(f"{name}: {raw!r} is not a non-negative {kind.__name__}")
        changes[name] = value
    return replace(load, **changes)


def _load_value(raw: object, kind: type[int] | type[float]) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        return None
    try:
        value = kind(raw)
    except ValueError:
        return None
    return value if value >= 0 else None


def knob_fields() -> list[str]:
    """Every Knobs field name (accepted by --set and apply_flags)."""
    return [f.name for f in fields(Knobs)]
