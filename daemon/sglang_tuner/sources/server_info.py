"""Read SGLang's `/server_info` (fallback `/get_server_info`): redact secrets, resolve the knobs."""

import json
from collections.abc import Mapping
from typing import Any

from sglang_tuner.model.flag_transforms import read_config, reported_fields
from sglang_tuner.model.secrets import redact as redact_secrets
from sglang_tuner.model.server_config import DISAGGREGATION_MODES, ServerConfig
from sglang_tuner.sources.http import BodyTooLargeError, HttpClient, HttpError, HttpResponse
from sglang_tuner.sources.timeout import timeout

REDACTED = "<redacted>"
SECRET_KEY_PARTS: tuple[str, ...] = ("api_key", "password", "secret", "credential")  # not "token"
# A real body is tens of KiB and nests 5 deep; past these it is not SGLang's (redacting and
# reading it recurse, and its parsed objects take ~10x its size).
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_JSON_DEPTH = 32


def is_secret_key(key: str) -> bool:
    """True for keys holding secrets (`api_key`, `admin_api_key`, `ssl_keyfile_password`, …)."""
    lowered = key.lower().replace("-", "_")
    return any(part in lowered for part in SECRET_KEY_PARTS)


def redact(obj: Any) -> Any:
    """A copy of `obj` with every secret value replaced, at any depth; unset (null/"") stays."""
    if isinstance(obj, Mapping):
        return {
            key: REDACTED if _needs_redaction(key, value) else redact(value)
            for key, value in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact(item) for item in obj]
    if isinstance(obj, str):
        # any string may be a URL or path with credentials in it (a model_path with a token)
        return redact_secrets(obj)
    return obj


def _needs_redaction(key: object, value: object) -> bool:
    """A secret key with a set value (null and empty strings carry nothing)."""
    return isinstance(key, str) and is_secret_key(key) and value not in (None, "")


def _as_int(value: object) -> int | None:
    """An int, or None for anything else (bools excluded)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _as_float(value: object) -> float | None:
    """A float, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _as_bool(value: object) -> bool | None:
    """A bool, or None."""
    return value if isinstance(value, bool) else None


def _as_str(value: object) -> str | None:
    """A non-empty string, or None."""
    return value if isinstance(value, str) and value else None


def _states(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The per-DP-rank `internal_states` (v0.4.7+); v0.4.6 merged them flat into the body."""
    states = body.get("internal_states")
    if isinstance(states, list):
        return [s for s in states if isinstance(s, Mapping)]
    return [states] if isinstance(states, Mapping) else []


def _get(body: Mapping[str, Any], key: str, *, state_first: bool = False) -> Any:
    """A field from the top level, else from `internal_states[0]` (or the other way round)."""
    states = _states(body)
    places = [body, *states[:1]]
    for place in reversed(places) if state_first else places:
        if place.get(key) is not None:
            return place[key]
    return None


def _cuda_graph_max_bs(body: Mapping[str, Any]) -> int | None:
    """`cuda_graph_config.decode.max_bs` (>= v0.5.14), then `cuda_graph_max_bs_decode`, then old
    (the renamed fields of `model/flag_transforms.RENAMED_FIELDS`)."""
    for key in reported_fields("--cuda-graph-max-bs"):
        first, *rest = key.split(".")
        value: Any = _get(body, first)
        for part in rest:
            value = value.get(part) if isinstance(value, Mapping) else None
        if _as_int(value) is not None:
            return _as_int(value)
    return None


def _effective_max_running(body: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(total over DP ranks, per DP rank) effective max running requests; CLI value as fallback.
    A log's startup summary gives one rank's figure at the top level."""
    key = "effective_max_running_requests_per_dp"
    per_dp = [_as_int(s.get(key)) for s in _states(body) or [body]]
    known = [v for v in per_dp if v is not None]
    if known:
        return sum(known), max(known)
    return _as_int(body.get("max_running_requests")), None


def _startup_available(body: Mapping[str, Any]) -> float | None:
    """Smallest `internal_states[].memory_usage.startup_available` (v0.5.17+), GB."""
    values = []
    for state in _states(body):
        usage = state.get("memory_usage")
        if isinstance(usage, Mapping) and _as_float(usage.get("startup_available")) is not None:
            values.append(float(usage["startup_available"]))
    return min(values) if values else None


def _disable_cuda_graph(body: Mapping[str, Any]) -> bool | None:
    """`disable_cuda_graph`, or >= v0.5.14's `disable_decode_cuda_graph`."""
    flags = [_as_bool(_get(body, k)) for k in ("disable_cuda_graph", "disable_decode_cuda_graph")]
    known = [flag for flag in flags if flag is not None]
    return any(known) if known else None


def _disaggregation_mode(body: Mapping[str, Any]) -> str | None:
    """The server's PD role: "null" (none), "prefill" or "decode"; None when not reported.

    `internal_states[0]` first: since PD role switching (0.5.23 `scheduler_components/
    internal_state.py`) the scheduler reports its current role there, and a flip leaves the
    top-level ServerArgs field at the launch value."""
    for place in [*_states(body)[:1], body]:
        if place.get("disaggregation_mode") in DISAGGREGATION_MODES:
            return str(place["disaggregation_mode"])
    return None


def parse_server_info(body: Mapping[str, Any]) -> ServerConfig:
    """Resolve the tuning knobs from a `/server_info` body (or a launch line's arguments) of any
    version (redacted in `raw`), in flag units: what SGLang reports transformed (the chunked
    prefill size and conservativeness under attention DP) is read back through the one table,
    `model/flag_transforms.py`."""
    clean = redact(body)
    total, per_dp = _effective_max_running(clean)
    return read_config(_reported(clean, total, per_dp))


def _reported(clean: Mapping[str, Any], total: int | None, per_dp: int | None) -> ServerConfig:
    """The knobs as the body reports them."""
    return ServerConfig(
        version=_as_str(clean.get("version")),
        model_path=_as_str(_get(clean, "model_path")),
        schedule_conservativeness=_as_float(_get(clean, "schedule_conservativeness")),
        mem_fraction_static=_as_float(_get(clean, "mem_fraction_static")),
        chunked_prefill_size=_as_int(_get(clean, "chunked_prefill_size")),
        max_prefill_tokens=_as_int(_get(clean, "max_prefill_tokens")),
        max_running_requests=total,
        max_running_requests_per_dp=per_dp,
        cuda_graph_max_bs=_cuda_graph_max_bs(clean),
        disable_cuda_graph=_disable_cuda_graph(clean),
        tp_size=_as_int(_get(clean, "tp_size")),
        dp_size=_as_int(_get(clean, "dp_size")),
        pp_size=_as_int(_get(clean, "pp_size")),
        enable_dp_attention=_as_bool(_get(clean, "enable_dp_attention")),
        enable_metrics_for_all_schedulers=_as_bool(
            _get(clean, "enable_metrics_for_all_schedulers")
        ),
        schedule_policy=_as_str(_get(clean, "schedule_policy")),
        attention_backend=_as_str(_get(clean, "attention_backend", state_first=True)),
        kv_cache_dtype=_as_str(_get(clean, "kv_cache_dtype")),
        quantization=_as_str(_get(clean, "quantization")),
        enable_torch_compile=_as_bool(_get(clean, "enable_torch_compile")),
        disable_radix_cache=_as_bool(_get(clean, "disable_radix_cache")),
        enable_hierarchical_cache=_as_bool(_get(clean, "enable_hierarchical_cache")),
        max_total_num_tokens=_as_int(_get(clean, "max_total_num_tokens")),
        context_length=_as_int(_get(clean, "context_length")),
        startup_available_gpu_mem_gb=_startup_available(clean),
        disaggregation_mode=_disaggregation_mode(clean),
        raw=clean,
    )


async def fetch_server_info(
    client: HttpClient, url: str, *, token: str | None, timeout_seconds: float
) -> tuple[ServerConfig | None, str | None]:
    """GET `/server_info` (or `/get_server_info` on 404): (config, None) or (None, one-line error).

    Never logs or returns the token or an unredacted body.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = url.rstrip("/")
    try:
        async with timeout(timeout_seconds):
            for path in ("/server_info", "/get_server_info"):
                response = await client.get(base + path, headers, max_body_bytes=MAX_BODY_BYTES)
                if response.status != 404:
                    return _read_response(response, base + path, token is not None)
    except TimeoutError:
        return None, f"GET {base}/server_info took longer than {timeout_seconds:g} s"
    except BodyTooLargeError:
        mib = MAX_BODY_BYTES // (1024 * 1024)
        return None, f"GET {base}/server_info returned more than {mib} MiB; aborted"
    except HttpError as exc:
        return None, f"GET {base}/server_info failed: {type(exc).__name__}"
    return None, f"GET {base}/server_info and /get_server_info returned 404"


def _read_response(
    response: HttpResponse, url: str, sent_token: bool
) -> tuple[ServerConfig | None, str | None]:
    """Turn one answer into a config or an error line."""
    code = response.status
    if code in (401, 403):
        hint = "the token was rejected" if sent_token else "set the target's API key"
        return None, f"GET {url} returned {code}: the server needs an API key ({hint})"
    if code != 200:
        return None, f"GET {url} returned {code} {response.reason}"
    too_deep = f"GET {url} returned JSON nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        body = json.loads(response.body)
    except RecursionError:  # json.loads recurses: a few hundred levels exhaust the stack
        return None, too_deep
    except ValueError:
        return None, f"GET {url} did not return JSON"
    if not isinstance(body, Mapping):
        return None, f"GET {url} returned JSON that is not an object"
    if _nesting_exceeds(body, MAX_JSON_DEPTH):
        return None, too_deep
    return parse_server_info(body), None


def _nesting_exceeds(body: Any, limit: int) -> bool:
    """True when objects and arrays nest more than `limit` deep (walked level by level)."""
    level, depth = [body], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        children = (c for o in level for c in (o.values() if isinstance(o, Mapping) else o))
        level = [c for c in children if isinstance(c, Mapping | list)]
    return False
