"""The change record: flags before -> after across a restart, who asked, and the warm verdict."""

import dataclasses

import pytest
from sglang_tuner.changes.record import (
    FLAGS,
    MAX_KEPT,
    RESTART,
    Change,
    ChangeLog,
    attribute,
    change_from_dict,
    flag_values,
)
from sglang_tuner.changes.verdict import HELPED, HURT, INCONCLUSIVE, NO_CHANGE
from sglang_tuner.model import signals as s
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.window import Window
from sglang_tuner.sources.server_info import parse_server_info

RULE = "scheduler_too_conservative"
CONSERVATIVENESS = "--schedule-conservativeness"


def _serve(window: Window, start: float, end: float, step: float = 5.0, **values: float) -> None:
    """Scrapes every `step` seconds from `start` to `end` (both included) with `values`."""
    t = start
    while t <= end:
        window.append(Snapshot("gpu-a", t, dict(values)))
        t += step


def _log(**kwargs) -> ChangeLog:
    return ChangeLog("gpu-a", kwargs.pop("profile", "offline"), 300.0, 60.0, **kwargs)


def _restart_at_330(log: ChangeLog, window: Window, new: float = 0.7, **kwargs) -> Change:
    """Five minutes served at 3.0 before a restart at 330 s into `--schedule-conservativeness`."""
    old = ServerConfig(schedule_conservativeness=3.0)
    return log.record(old, ServerConfig(schedule_conservativeness=new), window, 330.0, **kwargs)


# -- flag_values ---------------------------------------------------------------------------------


def test_flag_values_spells_each_tuning_flag_as_the_command_line_would():
    config = ServerConfig(
        version="0.5.9",
        schedule_conservativeness=1.0,
        mem_fraction_static=0.85,
        chunked_prefill_size=8192,
        max_running_requests=256,
        schedule_policy="FCFS",
        enable_torch_compile=True,
        disable_radix_cache=False,
    )
    assert flag_values(config) == {
        "version": "0.5.9",
        "--schedule-conservativeness": "1",  # a float as `%g`: no trailing ".0"
        "--mem-fraction-static": "0.85",
        "--chunked-prefill-size": "8192",
        "--max-running-requests": "256",
        "--schedule-policy": "fcfs",
        "--enable-torch-compile": "true",
        "--disable-radix-cache": "false",
    }


def test_flag_values_leaves_out_what_the_server_did_not_say():
    assert flag_values(ServerConfig()) == {}


# -- units: the flag as the operator types it, whatever /server_info reports ---------------------

MAX_RUNNING = "--max-running-requests"
LATENCY_RULE = "batch_too_large_for_latency"


def _server_info(
    version: str, flag: int, conservativeness: float = 1.0, dp: str = "attention", typed=True
) -> ServerConfig:
    """`parse_server_info` of a DeepSeek-V3 server on `--tp-size 8 --dp-size 8` (`dp`:
    "attention" adds `--enable-dp-attention`, "replicas" is plain DP, "none" is TP only) with
    `--max-running-requests flag` (`typed` False: left out, the server sized it to `flag`) and
    `--schedule-conservativeness conservativeness`, reported as each version does: 0.5.22+ says
    `attn_dp_size` (and `dp_size` 1); 0.5.9+ gives every scheduler's effective limit (its
    share of the flag under DP attention); before, the flag."""
    attention, release = dp == "attention", tuple(int(n) for n in version.split("."))
    ranks = 1 if dp == "none" else 8
    body: dict[str, object] = {
        "version": version, "tp_size": 8, "dp_size": ranks, "enable_dp_attention": attention,
        "max_running_requests": flag if typed or release < (0, 5, 9) else None,
        # SGLang schedules with 0.3 x the flag under DP attention and reports the product
        "schedule_conservativeness": conservativeness * (0.3 if attention else 1.0),
    }  # fmt: skip
    if release >= (0, 5, 22):
        body.update(attn_dp_size=ranks if attention else 1, dp_size=1 if attention else ranks)
    if release >= (0, 5, 9):
        share = flag // ranks if attention else flag
        body["internal_states"] = [{"effective_max_running_requests_per_dp": share}] * ranks
    return parse_server_info(body)


VERSIONS = ("0.5.23", "0.5.9", "0.5.4")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dp", ["attention", "replicas", "none"])
@pytest.mark.parametrize("typed", [True, False])
def test_flag_values_max_running_requests_is_the_flags_own_value_on_every_version(
    version, dp, typed
):
    # under DP attention 0.5.9+ reports 128 per scheduler for the flag 1024 (8 x 128)
    config = _server_info(version, 1024, dp=dp, typed=typed)
    assert flag_values(config)[MAX_RUNNING] == "1024"


def test_flag_values_max_running_requests_without_dp_facts_is_the_per_rank_limit():
    # the rules ask in the same unit (`predict/units.py`): unknown DP attention counts as off
    per_rank = ServerConfig(max_running_requests=512, max_running_requests_per_dp=128)
    assert flag_values(per_rank)[MAX_RUNNING] == "128"
    assert flag_values(ServerConfig(max_running_requests=512))[MAX_RUNNING] == "512"


def test_flag_values_max_running_requests_is_the_typed_flag_where_memory_caps_the_ranks():
    # --max-running-requests 1024 over 8 DP-attention ranks, but the pool holds 100 per rank
    capped = ServerConfig(
        dp_size=8, enable_dp_attention=True, max_running_requests=800,
        max_running_requests_per_dp=100, raw={"max_running_requests": 1024},
    )  # fmt: skip
    assert flag_values(capped)[MAX_RUNNING] == "1024"
    assert flag_values(dataclasses.replace(capped, raw={}))[MAX_RUNNING] == "800"


@pytest.mark.parametrize("version", VERSIONS)
def test_flag_values_schedule_conservativeness_is_the_flag_not_the_scaled_report(version):
    config = _server_info(version, 1024, conservativeness=1.3)
    assert flag_values(config)[CONSERVATIVENESS] == "1.3"  # reported 0.39


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dp", ["attention", "replicas", "none"])
def test_record_credits_a_request_cap_to_the_rule_that_asked_in_flag_units(version, dp):
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    # the server sized the cap itself before the operator typed the one asked for
    old = _server_info(version, 1024, dp=dp, typed=False)
    new = _server_info(version, 928, dp=dp)
    asked = {MAX_RUNNING: ("928", LATENCY_RULE)}
    change = _log().record(old, new, window, 330.0, asked, {LATENCY_RULE: 0.8})
    assert (change.before, change.after) == ({MAX_RUNNING: "1024"}, {MAX_RUNNING: "928"})
    assert change.rule == LATENCY_RULE and change.asked_ratio == 0.8
    assert change.revert == {MAX_RUNNING: "1024"}


# -- attribute -----------------------------------------------------------------------------------


def test_attribute_names_the_rule_whose_every_suggested_value_is_in_the_restart():
    asked = {
        "--mem-fraction-static": ("0.8", "cuda_graph_bs_too_small"),
        "--cuda-graph-max-bs": ("512", "cuda_graph_bs_too_small"),
        CONSERVATIVENESS: ("0.3", RULE),
    }
    after = {"--mem-fraction-static": "0.80", "--cuda-graph-max-bs": "512"}  # "0.80" is 0.8
    assert attribute(after, asked) == "cuda_graph_bs_too_small"


def test_attribute_is_none_when_the_operator_applied_only_part_of_the_advice():
    asked = {
        "--mem-fraction-static": ("0.8", "cuda_graph_bs_too_small"),
        "--cuda-graph-max-bs": ("512", "cuda_graph_bs_too_small"),
    }
    assert attribute({"--cuda-graph-max-bs": "512"}, asked) is None
    assert attribute({CONSERVATIVENESS: "0.5"}, {CONSERVATIVENESS: ("0.3", RULE)}) is None


def test_attribute_compares_words_exactly_and_unset_never_matches_a_number():
    asked = {"--schedule-policy": ("lpm", "policy_rule")}
    assert attribute({"--schedule-policy": "lpm"}, asked) == "policy_rule"
    assert attribute({"--schedule-policy": "fcfs"}, asked) is None
    assert attribute({CONSERVATIVENESS: "unset"}, {CONSERVATIVENESS: ("0.3", RULE)}) is None


# -- ChangeLog.record ----------------------------------------------------------------------------


def test_record_a_restart_with_new_flags_is_a_flags_change_of_only_the_changed_flags():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    log = _log()
    old = ServerConfig(schedule_conservativeness=3.0, mem_fraction_static=0.85, tp_size=2)
    new = ServerConfig(schedule_conservativeness=0.7, mem_fraction_static=0.85, tp_size=2)
    change = log.record(old, new, window, 330.0)
    assert change.kind == FLAGS and change.target == "gpu-a" and change.at == 330.0
    assert (change.before, change.after) == ({CONSERVATIVENESS: "3"}, {CONSERVATIVENESS: "0.7"})
    assert change.revert == {CONSERVATIVENESS: "3"}
    assert change.rule is None and change.verdict is None and change.after_window is None
    assert log.changes == [change]


def test_record_a_restart_with_the_same_flags_is_a_restart_and_credits_no_advice():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    log = _log()
    same = ServerConfig(schedule_conservativeness=0.3)
    asked = {CONSERVATIVENESS: ("0.3", RULE)}  # the value asked for is the one it runs with
    change = log.record(same, same, window, 330.0, asked, {RULE: 0.9})
    assert (change.kind, change.before, change.after) == (RESTART, {}, {})
    assert change.rule is None and change.asked_ratio is None


def test_record_a_flag_set_or_cleared_shows_unset_on_the_other_side():
    window = Window(10)
    log = _log()
    # /server_info names every argument, null where the launch command left it out
    change = log.record(
        ServerConfig(
            mem_fraction_static=0.85,
            raw={"mem_fraction_static": 0.85, "chunked_prefill_size": None},
        ),
        ServerConfig(
            chunked_prefill_size=4096,
            raw={"mem_fraction_static": None, "chunked_prefill_size": 4096},
        ),
        window,
        10.0,
    )
    assert change.before == {"--chunked-prefill-size": "unset", "--mem-fraction-static": "0.85"}
    assert change.after == {"--chunked-prefill-size": "4096", "--mem-fraction-static": "unset"}


def test_record_a_read_that_never_named_a_flag_is_no_change_of_it():
    # the first read came from a crash line ("Current value: mem_fraction_static=0.95"); the
    # next from /server_info with every argument: only the fraction can be compared
    partial = ServerConfig(mem_fraction_static=0.95, raw={"mem_fraction_static": 0.95})
    full = ServerConfig(
        mem_fraction_static=0.95, chunked_prefill_size=16384, enable_torch_compile=False,
        raw={"mem_fraction_static": 0.95, "chunked_prefill_size": 16384,
             "enable_torch_compile": False},
    )  # fmt: skip
    change = _log().record(partial, full, Window(10), 10.0)
    assert change.kind == RESTART and change.before == {} and change.after == {}


def test_record_an_upgrade_is_a_change_but_its_revert_names_only_flags():
    window = Window(10)
    change = _log().record(
        ServerConfig(version="0.5.4", max_running_requests=256),
        ServerConfig(version="0.5.9", max_running_requests=256),
        window,
        10.0,
    )
    assert change.kind == FLAGS
    assert (change.before, change.after) == ({"version": "0.5.4"}, {"version": "0.5.9"})
    assert change.revert == {}  # no command-line flag brings a version back


def test_record_credits_the_asking_rule_with_its_condition_ratio_at_the_time():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    asked = {CONSERVATIVENESS: ("0.7", RULE), "--chunked-prefill-size": ("4096", "other_rule")}
    change = _restart_at_330(_log(), window, 0.7, asked=asked, asked_ratio={RULE: 0.85})
    assert change.rule == RULE and change.asked_ratio == 0.85


def test_record_summarizes_the_window_before_the_restart_and_is_due_after_warmup_and_as_long():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)  # the window reaches back 5 min: 30 s on
    _serve(window, 330.0, 330.0, gen_throughput=9999.0)  # the new process's first scrape
    change = _restart_at_330(_log(), window)
    summary = change.before_window.signals[s.GEN_THROUGHPUT]
    assert (summary.samples, summary.mean) == (55, 4000.0)  # the new process's sample is not in
    assert (change.before_window.start, change.before_window.end) == (30.0, 300.0)
    assert change.warm_seconds == 60.0
    assert change.due == 330.0 + 60.0 + 270.0


def test_record_waits_two_service_times_of_slow_requests_before_the_after_window():
    window = Window(200)
    # requests take 40 s end to end, 5 s of it waiting: 35 s of service, twice over
    _serve(
        window, 5.0, 300.0, gen_throughput=4000.0, e2e_p50_seconds=40.0, queue_time_p50_seconds=5.0
    )
    change = _restart_at_330(_log(), window)
    assert change.warm_seconds == 70.0
    assert change.due == 330.0 + 70.0 + 270.0


def test_record_never_waits_longer_than_one_window_for_the_server_to_warm():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0, e2e_p50_seconds=600.0)
    change = _restart_at_330(_log(), window)
    assert change.warm_seconds == 300.0  # the window, not 1200 s


def test_record_keeps_the_newest_changes_only():
    window = Window(10)
    log = _log()
    for k in range(MAX_KEPT + 5):
        old = ServerConfig(chunked_prefill_size=1000 + k)
        log.record(old, ServerConfig(chunked_prefill_size=1001 + k), window, float(k))
    assert len(log.changes) == MAX_KEPT
    assert [c.at for c in log.changes] == [float(k) for k in range(5, MAX_KEPT + 5)]


def test_restore_keeps_the_newest_changes_and_counts_their_verdicts():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    log = _log()
    judged = _restart_at_330(log, window)
    _serve(window, 335.0, 660.0, gen_throughput=4800.0)
    judged = log.verify(window, 660.0, 6)
    assert judged is not None
    restarts = [
        dataclasses.replace(judged, kind=RESTART, verdict=None, at=float(k))
        for k in range(MAX_KEPT)
    ]
    fresh = _log()
    fresh.restore([judged, *restarts])
    assert len(fresh.changes) == MAX_KEPT and judged not in fresh.changes
    assert fresh.verdicts == {}  # the judged one fell off the end
    fresh.restore([*restarts[1:], judged])
    assert fresh.verdicts == {HELPED: 1}


def test_change_from_dict_reads_back_what_asdict_wrote():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0, token_usage=0.6)
    log = _log()
    pending = _restart_at_330(log, window, asked={CONSERVATIVENESS: ("0.7", RULE)})
    assert change_from_dict(dataclasses.asdict(pending)) == pending
    _serve(window, 335.0, 660.0, gen_throughput=3000.0, token_usage=0.6)
    judged = log.verify(window, 660.0, 6)
    assert judged is not None and judged.verdict is not None
    assert change_from_dict(dataclasses.asdict(judged)) == judged


def test_change_from_dict_reads_a_verdict_stored_before_it_named_its_metrics():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    log = _log()
    _restart_at_330(log, window)
    _serve(window, 335.0, 660.0, gen_throughput=3000.0)
    judged = log.verify(window, 660.0, 6)
    assert judged is not None and judged.verdict is not None
    assert judged.verdict.judged_on == (s.GEN_THROUGHPUT,)
    stored = dataclasses.asdict(judged)
    del stored["verdict"]["judged_on"]
    restored = change_from_dict(stored)
    assert restored.verdict is not None and restored.verdict.judged_on == ()


# -- ChangeLog.verify ----------------------------------------------------------------------------


def test_verify_judges_a_flag_change_once_the_warm_after_window_is_complete():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    log = _log()
    change = _restart_at_330(log, window)
    _serve(window, 335.0, 655.0, gen_throughput=4800.0)
    assert log.verify(window, 655.0, 6) is None  # due at 660
    assert log.changes[-1].verdict is None
    _serve(window, 660.0, 660.0, gen_throughput=4800.0)
    judged = log.verify(window, 660.0, 6)
    assert judged is not None and judged.verdict is not None
    assert judged.verdict.verdict == HELPED and judged.verdict.reason == "better: gen_throughput"
    assert log.changes[-1] == judged and log.verdicts == {HELPED: 1}
    # the warm-up is skipped: the after window starts past 330 + 60 s
    assert judged.after_window is not None and judged.after_window.start == 395.0
    assert judged.after_window.end == 660.0
    assert dataclasses.replace(judged, after_window=None, verdict=None) == change


def test_verify_holds_a_latency_to_the_buckets_it_was_read_from():
    # gen throughput flat; the TTFT p99 read 210 s before and 380 s after, both in SGLang's
    # (200, 400] bucket: no measured cost, so no `hurt` (without the bounds it is one)
    def judge(resolution):
        window, log = Window(200), _log()
        _serve(window, 5.0, 300.0, gen_throughput=4000.0, ttft_p99_seconds=210.0)
        _restart_at_330(log, window)
        _serve(window, 335.0, 660.0, gen_throughput=4000.0, ttft_p99_seconds=380.0)
        judged = log.verify(window, 660.0, 6, resolution)
        assert judged is not None and judged.verdict is not None
        return judged.verdict

    assert judge(None).verdict == HURT
    held = judge({s.TTFT_P99_SECONDS: (100.0, 200.0, 400.0, float("inf"))})
    assert held.verdict == NO_CHANGE
    assert "within the histogram's resolution" in held.reason


def test_verify_judges_a_change_once_only():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    log = _log()
    _restart_at_330(log, window)
    _serve(window, 335.0, 700.0, gen_throughput=3000.0)
    first = log.verify(window, 660.0, 6)
    assert first is not None and first.verdict is not None and first.verdict.verdict == HURT
    assert log.verify(window, 700.0, 6) is None
    assert log.changes[-1] == first and log.verdicts == {HURT: 1}


def test_verify_never_judges_a_restart_with_the_same_flags():
    window = Window(200)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0)
    log = _log()
    same = ServerConfig(schedule_conservativeness=1.0)
    log.record(same, same, window, 330.0)
    _serve(window, 335.0, 1200.0, gen_throughput=4800.0)
    assert log.verify(window, 1200.0, 6) is None
    assert log.changes[-1].verdict is None and log.verdicts == {}


def test_verify_with_nothing_recorded_is_none():
    assert _log().verify(Window(10), 1000.0, 6) is None


def test_verify_follows_the_metrics_of_the_asking_rule_where_it_names_them():
    def judged_with(verifies: dict[str, tuple[str, ...]]) -> str:
        window = Window(200)
        _serve(window, 5.0, 300.0, gen_throughput=4000.0, token_usage=0.6)
        log = _log(verifies=verifies)
        _restart_at_330(log, window, asked={CONSERVATIVENESS: ("0.7", RULE)})
        _serve(window, 335.0, 660.0, gen_throughput=4000.0, token_usage=0.9)
        change = log.verify(window, 660.0, 6)
        assert change is not None and change.verdict is not None
        return change.verdict.verdict

    assert judged_with({}) == NO_CHANGE  # offline: throughput decides, and it stayed
    assert judged_with({RULE: (s.TOKEN_USAGE,)}) == HELPED
    assert judged_with({"another_rule": (s.TOKEN_USAGE,)}) == NO_CHANGE


def test_verify_a_change_with_no_window_before_it_is_inconclusive_once_warm():
    window = Window(200)  # the daemon started just before the restart
    log = _log()
    change = _restart_at_330(log, window)
    assert change.due == 390.0
    _serve(window, 335.0, 390.0, gen_throughput=4800.0)
    judged = log.verify(window, 390.0, 6)
    assert judged is not None and judged.verdict is not None
    assert judged.verdict.verdict == INCONCLUSIVE and "too few samples" in judged.verdict.reason


def test_verify_still_judges_a_flag_change_when_a_crash_restart_follows_it():
    window = Window(400)
    _serve(window, 5.0, 300.0, gen_throughput=4000.0, restarts=0.0)
    log = _log()
    change = _restart_at_330(log, window)
    _serve(window, 335.0, 450.0, gen_throughput=3000.0, restarts=0.0)
    crashed = ServerConfig(schedule_conservativeness=0.7)  # the same flags, a new process
    log.record(crashed, crashed, window, 455.0)
    _serve(window, 455.0, 660.0, gen_throughput=3000.0, restarts=0.0)
    log.verify(window, 660.0, 6)
    flag_change = next(c for c in log.changes if c.at == change.at)
    assert flag_change.verdict is not None
