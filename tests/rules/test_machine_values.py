"""No machine flag value is relative or in reported units: every rule, on servers of every SGLang
release (attention DP on and off, values known and unknown, a flag history), gives as
`Action.suggested` either nothing or an absolute value that release's argparse takes, in the
flag's own units; and a current value it quotes from the server is the flag as typed, not what
SGLang reports after its transforms."""

import json
import math
from dataclasses import replace
from pathlib import Path

from helpers import evaluate, window_from
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_tuner.model.advice import Action, Finding
from sglang_tuner.model.flag_transforms import read, write
from sglang_tuner.model.flags import FlagHistory, FlagOutcome
from sglang_tuner.model.server_config import PROFILES
from sglang_tuner.model.versions import in_span
from sglang_tuner.predict.crash_fix import reported
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.rules.sglang.flags import VALUES, accepts_flag, accepts_value
from sglang_tuner.sources.server_info import parse_server_info

CATALOGUE = Path(__file__).parents[2] / "daemon/sglang_tuner/sources/log/messages"
VERSIONS: tuple[str, ...] = tuple(
    json.loads((CATALOGUE / "sglang_messages.json").read_text())["versions_read"]
)
# Flag -> (integer?, least, most) SGLang runs with; -1 turns chunked prefill off.
NUMERIC = {
    "--mem-fraction-static": (False, 0.01, 0.99),
    "--schedule-conservativeness": (False, 0.01, 10.0),
    "--chunked-prefill-size": (True, -1, 1 << 20),
    "--max-prefill-tokens": (True, 1, 1 << 20),
    "--max-running-requests": (True, 1, 1 << 20),
    "--cuda-graph-max-bs": (True, 1, 4096),
    "--cuda-graph-max-bs-decode": (True, 1, 4096),
    "--torch-compile-max-bs": (True, 1, 4096),
    "--tp-size": (True, 1, 256),
    "--dp-size": (True, 1, 256),
}
SWITCHES = {"true", "false", "on", "off"}  # store_true flags: added ("true"/"on") or dropped
# Fields SGLang reports transformed under attention DP: the typed value's reading, per flag.
TRANSFORMED = {
    "--chunked-prefill-size": "chunked_prefill_size",
    "--schedule-conservativeness": "schedule_conservativeness",
}
GPUS = (None, "NVIDIA L4", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200")


def _body(draw: st.DrawFn, version: str) -> tuple[dict[str, object], dict[str, float]]:
    """A /server_info body as this release reports it, and the flags as typed."""
    width, on = draw(st.sampled_from((1, 2, 4, 8))), draw(st.booleans())
    body: dict[str, object] = {"version": version, "tp_size": 8, "dp_size": width,
                               "enable_dp_attention": on and width > 1}  # fmt: skip
    if on and in_span(version, "0.5.22"):  # --dp-size N --enable-dp-attention -> attn_dp_size
        body.update(dp_size=1, attn_dp_size=width)
    typed = {
        "--mem-fraction-static": draw(st.none() | st.integers(40, 95).map(lambda n: n / 100)),
        "--chunked-prefill-size": draw(
            st.none() | st.sampled_from((-1, 512, 2048, 4096, 8192, 16384))
        ),
        "--schedule-conservativeness": draw(st.none() | st.sampled_from((0.3, 0.5, 1.0, 1.3))),
        "--max-running-requests": draw(st.none() | st.sampled_from((1, 8, 64, 256, 1024, 4096))),
        "--cuda-graph-max-bs": draw(st.none() | st.sampled_from((8, 64, 160, 256, 512))),
    }
    config = parse_server_info(body)  # the parallelism SGLang reports, for its transforms
    for flag, value in typed.items():
        if value is not None:  # what SGLang reports for the typed value
            body[flag[2:].replace("-", "_")] = type(value)(write(flag, value, config))
    body["schedule_policy"] = draw(st.sampled_from(("lpm", "fcfs", None)))
    body["context_length"] = draw(st.sampled_from((None, 4096, 32768, 131072)))
    body["max_total_num_tokens"] = draw(st.sampled_from((None, 20000, 400000)))
    return {k: v for k, v in body.items() if v is not None}, {
        k: v for k, v in typed.items() if v is not None
    }


SERIES = st.sampled_from(("0x10", "1x10", "0x9 1", "0x5 2 0x4", "3x10", "_x10"))
LEVELS = st.sampled_from(("0x10", "0.3x10", "0.95x10", "1x10", "5x10", "30x10", "200x10", "_x10"))
COUNTS = ("allocator_bug_events", "cuda_graph_capture_oom_events", "decode_oom_events",
          "kv_pool_exhausted_events", "prefill_oom_events", "startup_not_enough_memory_events",
          "restarts")  # fmt: skip
OTHERS = sorted({s for r in ALL_RULES for s in (*r.signals, *r.requires)} - set(COUNTS))


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, object], dict[str, float], dict[str, object]]:
    version = draw(st.sampled_from(VERSIONS))
    body, typed = _body(draw, version)
    series = {name: draw(SERIES) for name in COUNTS}
    series |= {name: draw(LEVELS) for name in OTHERS}
    if draw(st.booleans()):
        series["mem_fraction_required"] = draw(st.sampled_from(("_x10", "0.91x10", "0.97x10")))
    history = FlagHistory()
    if draw(st.booleans()):
        low, high = sorted(draw(st.lists(st.integers(50, 95), min_size=2, max_size=2)))
        history = FlagHistory(
            failing={"mem_fraction_static": FlagOutcome(high / 100, 1.0, "decode_oom_events")},
            failing_low={
                "mem_fraction_static": FlagOutcome(
                    low / 100, 2.0, "startup_not_enough_memory_events", True
                )
            },
        )
    kwargs = {
        "profile": draw(st.sampled_from(PROFILES)),
        "history": history,
        "gpu": draw(st.sampled_from(GPUS)),
        "series": {k: v for k, v in series.items() if v != "_x10"},
    }
    return body, typed, kwargs


def _absolute(move: Action, version: str) -> None:
    """The machine value parses as an absolute value this release takes."""
    flag, value = move.flag or "", move.suggested or ""
    assert value == value.strip() and not value.startswith("+"), (flag, value)
    assert accepts_flag(flag, version) is not False, (flag, version)
    if flag in NUMERIC:
        integer, least, most = NUMERIC[flag]
        number = float(value)  # raises on a relative or worded value
        assert math.isfinite(number) and least <= number <= most, (flag, value)
        assert not integer or number == int(number), (flag, value)
        assert not (flag == "--chunked-prefill-size" and -1 < number < 1), value
    elif flag in VALUES:
        assert accepts_value(flag, value, version) is not False, (flag, value, version)
    else:
        assert value in SWITCHES or value.replace(".", "", 1).isdigit(), (flag, value)


def _flag_units(move: Action, typed: dict[str, float], config_body: dict[str, object]) -> None:
    """A current value quoted from the server is the typed flag's reading, not SGLang's
    transformed report."""
    flag = move.flag or ""
    if flag not in TRANSFORMED or flag not in typed or not reported(move):
        return
    config = parse_server_info(config_body)
    expected = read(flag, write(flag, typed[flag], config), config)
    assert float(move.current or "nan") == expected, (flag, move.current, typed[flag])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_machine_value_is_absolute_and_in_flag_units(case):
    body, typed, kwargs = case
    config = parse_server_info(body)
    if kwargs["gpu"] is not None:
        config = replace(config, gpu_model=kwargs["gpu"])
    view = window_from(**kwargs["series"])
    for rule in ALL_RULES:
        out = evaluate(rule, view, config=config, profile=kwargs["profile"],
                       history=kwargs["history"])  # fmt: skip
        if not isinstance(out, Finding):
            continue
        for move in (out.action, *out.action.companions):
            if move.flag is None or move.suggested is None:
                continue
            _absolute(move, str(body["version"]))
            _flag_units(move, typed, body)
