"""The table of how SGLang transforms a flag: each row's fact on both sides of its version, and
the round trip over every release x attention-DP setting x value, read through the real
`/server_info` and launch-line readers."""

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_tuner.model.flag_transforms import (
    TRANSFORMS,
    dp_attention_on,
    max_running_flag,
    max_running_per_rank,
    ranks_sharing,
    read,
    transform_of,
    write,
)
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.versions import in_span
from sglang_tuner.sources.log.lines import scan_lines
from sglang_tuner.sources.log.server_args import parse_server_args
from sglang_tuner.sources.server_info import parse_server_info

CATALOGUE = Path(__file__).parents[2] / "daemon/sglang_tuner/sources/log/messages"
# Every release whose wheel the message catalogue read that has attention DP (0.4.0 - 0.5.23;
# the catalogue reads back to 0.1.3, before `--enable-dp-attention` existed).
VERSIONS: tuple[str, ...] = tuple(
    v
    for v in json.loads((CATALOGUE / "sglang_messages.json").read_text())["versions_read"]
    if in_span(v, "0.4.0")
)
CHUNK, CONS, RUNNING = (
    "--chunked-prefill-size",
    "--schedule-conservativeness",
    "--max-running-requests",
)


def body_for(version: str, width: int, enabled: bool, tp: int = 8) -> dict[str, object]:
    """A `/server_info` body's parallelism fields as this version reports them."""
    if not in_span(version, "0.4.4.post1"):  # dp_size forced to tp_size under DP attention
        return {"version": version, "tp_size": tp, "dp_size": tp if enabled else width,
                "enable_dp_attention": enabled}  # fmt: skip
    if in_span(version, "0.5.22"):  # --dp-size N --enable-dp-attention -> attn_dp_size N
        attn = width if enabled else 1
        return {"version": version, "tp_size": tp, "dp_size": 1 if enabled else width,
                "attn_dp_size": attn, "enable_dp_attention": enabled and width > 1}  # fmt: skip
    return {"version": version, "tp_size": tp, "dp_size": width,
            "enable_dp_attention": enabled and width > 1}  # fmt: skip


servers = st.builds(
    body_for,
    st.sampled_from(VERSIONS),
    st.sampled_from((1, 2, 4, 8, 16)),
    st.booleans(),
)


def test_the_table_cites_sglang_for_every_row_and_names_real_versions():
    for row in TRANSFORMS:
        assert row.where and row.since in VERSIONS
        assert row.until is None or row.until in VERSIONS


@pytest.mark.parametrize(
    ("version", "typed", "reported"),
    [
        ("0.4.0", 8192, 4096),  # server_args.py: // 2 whatever the width
        ("0.4.4", 8192, 4096),
        ("0.4.4.post1", 8192, 1024),  # // dp_size from here on
        ("0.4.10", 8192, 1024),
        ("0.5.21", 8192, 1024),  # arg_groups/parallel_hook.py
        ("0.5.22", 8192, 1024),  # // attn_dp_size
        ("0.5.23", -1, -1),  # chunking off stays off
    ],
)
def test_chunked_prefill_under_eight_attention_dp_ranks(version, typed, reported):
    config = parse_server_info(body_for(version, 8, True))
    assert write(CHUNK, typed, config) == reported
    assert read(CHUNK, reported, config) == typed


def test_conservativeness_is_scaled_in_every_release_and_only_under_attention_dp():
    for version in VERSIONS:
        on, off = (parse_server_info(body_for(version, 4, e)) for e in (True, False))
        assert write(CONS, 1.3, on) == pytest.approx(0.39)
        assert write(CONS, 1.3, off) == 1.3


def test_max_running_requests_is_split_per_rank_from_0_4_1_post7():
    old, new = (parse_server_info(body_for(v, 8, True)) for v in ("0.4.1.post6", "0.4.1.post7"))
    assert write(RUNNING, 512, old) == 512 and ranks_sharing(RUNNING, old) == 1
    assert write(RUNNING, 512, new) == 64 and ranks_sharing(RUNNING, new) == 8
    plain_dp = parse_server_info(body_for("0.5.9", 8, False))
    assert write(RUNNING, 512, plain_dp) == 512  # replicas each take the whole flag


def test_dp_attention_with_one_rank_is_off_from_0_4_4_post1():
    # 0.4.0-0.4.4: enable_dp_attention alone scaled the flags (dp_size forced to tp_size 1)
    assert dp_attention_on(ServerConfig(version="0.4.3", tp_size=1, dp_size=1,
                                        enable_dp_attention=True)) is True  # fmt: skip
    assert (
        dp_attention_on(ServerConfig(version="0.5.9", dp_size=1, enable_dp_attention=True)) is False
    )


def test_renamed_graph_flag_shares_the_row_and_clamp_of_0_4_0():
    config = parse_server_info(body_for("0.4.0", 8, True))
    assert transform_of("--cuda-graph-max-bs-decode", "0.4.0") is transform_of(
        "--cuda-graph-max-bs", "0.4.0"
    )
    assert write("--cuda-graph-max-bs", 160, config) == 96
    assert transform_of("--cuda-graph-max-bs", "0.4.0.post2") is None


@settings(max_examples=400, deadline=None)
@given(servers, st.integers(1, 65536))
def test_chunk_round_trip_through_server_info(body, reported):
    """write(read(x)) == x for what SGLang reports; the reader gives the smallest flag that
    SGLang turns into it."""
    config = parse_server_info({**body, "chunked_prefill_size": reported})
    assert write(CHUNK, config.chunked_prefill_size, config) == reported
    if config.chunked_prefill_size != reported:
        assert write(CHUNK, config.chunked_prefill_size - 1, config) < reported


@settings(max_examples=400, deadline=None)
@given(servers, st.integers(1, 65536))
def test_typed_chunk_round_trip(body, typed):
    """What an operator types, reported by SGLang, read back: the same flag, or one SGLang
    runs identically (the integer division drops the rest)."""
    config = parse_server_info(body)
    reported = write(CHUNK, typed, config)
    again = read(CHUNK, reported, config)
    assert write(CHUNK, again, config) == reported and again <= typed


@settings(max_examples=400, deadline=None)
@given(servers, st.integers(1, 300).map(lambda n: n / 100))
def test_conservativeness_round_trip_through_the_launch_line(body, typed):
    """The launch line's repr holds SGLang's product; read back it is the typed value."""
    config = parse_server_info(body)
    product = write(CONS, typed, config)  # SGLang's own `schedule_conservativeness * 0.3`
    fields = ", ".join(
        f"{k}={v!r}" for k, v in {**body, "schedule_conservativeness": product}.items()
    )
    launched = parse_server_info(parse_server_args(f"server_args=ServerArgs({fields})"))
    assert launched.schedule_conservativeness == typed
    assert write(CONS, launched.schedule_conservativeness, launched) == product


@settings(max_examples=400, deadline=None)
@given(servers, st.integers(1, 8192))
def test_max_running_round_trip_per_rank(body, per_rank):
    """A per-rank cap as a flag, and back (the unit the rules reason in)."""
    config = parse_server_info(body)
    flag = read(RUNNING, per_rank, config)
    assert write(RUNNING, flag, config) == per_rank
    reported = parse_server_info({**body, "max_running_requests": flag})
    assert max_running_flag(reported) == flag and max_running_per_rank(reported) == per_rank


def test_the_launch_command_gives_the_typed_value_the_division_lost():
    # 0.5.20+ /server_info has launch_command: 8193 // 8 = 1024 reads back as 8192 without it
    body = {**body_for("0.5.21", 8, True), "chunked_prefill_size": 1024,
            "schedule_conservativeness": 0.39}  # fmt: skip
    assert parse_server_info(body).chunked_prefill_size == 8192
    command = "python -m sglang.launch_server --chunked-prefill-size=8193 --dp-size 8 "
    command += "--enable-dp-attention --schedule-conservativeness 1.3"
    config = parse_server_info({**body, "launch_command": command})
    assert (config.chunked_prefill_size, config.schedule_conservativeness) == (8193, 1.3)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"cuda_graph_max_bs": 160}, 160),  # <= 0.5.13
        ({"cuda_graph_max_bs_decode": 256, "cuda_graph_max_bs": 8}, 256),  # 0.5.14+ field
        ({"cuda_graph_config": {"decode": {"max_bs": 512}}, "cuda_graph_max_bs_decode": 8}, 512),
    ],
)
def test_the_renamed_graph_size_is_read_from_the_newest_field(fields, expected):
    assert parse_server_info({"version": "0.5.17", **fields}).cuda_graph_max_bs == expected


def test_the_startup_summarys_request_cap_is_one_ranks_not_the_flag():
    # `max_running_requests=` in the scheduler's summary line is its own cap (0.4.10
    # scheduler.py: self.max_running_requests, the flag // 8 here): 64 per rank is a flag of 512.
    launch = (
        "[2026-01-05 10:00:00] server_args=ServerArgs(tp_size=8, dp_size=8, "
        "enable_dp_attention=True, max_running_requests=None, chunked_prefill_size=1024)"
    )
    summary = (
        "[2026-01-05 10:01:00 DP0 TP0] max_total_num_tokens=500000, chunked_prefill_size=1024, "
        "max_prefill_tokens=16384, max_running_requests=64, context_len=32768"
    )
    args = scan_lines([launch, summary]).server_args
    assert args is not None
    config = parse_server_info(args)
    assert (max_running_flag(config), max_running_per_rank(config)) == (512, 64)
    assert config.chunked_prefill_size == 8192


@pytest.mark.parametrize(("attention", "expected"), [(False, 256), (True, 1024)])
def test_the_request_cap_is_held_as_the_flag_not_the_ranks_sum(attention, expected):
    # 4 ranks each running 256 (0.5.8+ internal_states): replicas took the flag whole (256);
    # attention-DP ranks split it (256 each of 1024). Summed, replicas read as 1024: a crash
    # history or change log in those units compares 4x wrong against advice in the flag's.
    body = {**body_for("0.5.9", 4, attention),
            "internal_states": [{"effective_max_running_requests_per_dp": 256}] * 4}  # fmt: skip
    config = parse_server_info(body)
    assert config.max_running_requests == expected
    assert max_running_per_rank(config) == 256
