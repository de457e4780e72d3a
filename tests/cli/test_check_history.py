"""`check --prometheus`'s arguments, settings and output formats (no Prometheus needed; the real
one is in tests/sources/prometheus/test_history_e2e.py)."""

import pytest
from sglang_tuner.api.schemas.advice_response import AdviceList
from sglang_tuner.cli.check import (
    advice_csv,
    advice_table,
    history_settings,
    latency_every,
    run_check,
    time_of,
)
from sglang_tuner.cli.parser import build_parser
from sglang_tuner.config.duration import seconds


def _args(*argv: str):
    return build_parser().parse_args(["check", *argv])


@pytest.mark.parametrize(
    ("text", "want"), [("1h", 3600.0), ("1h30m", 5400.0), ("90s", 90.0), ("600", 600.0)]
)
def test_since_takes_prometheus_durations_or_seconds(text: str, want: float):
    assert _args("--prometheus", "http://p", "--since", text).since == want


@pytest.mark.parametrize("text", ["", "3x", "1h 2m", "-5", "0"])
def test_since_refuses_what_is_not_a_positive_duration(text: str):
    with pytest.raises(ValueError, match="duration"):
        seconds(text)


@pytest.mark.parametrize("flag", ["--since", "--duration", "--interval", "--window"])
def test_every_duration_flag_takes_5m(flag: str):
    assert getattr(_args(flag, "5m"), flag[2:]) == 300.0
    assert getattr(_args(flag, "90"), flag[2:]) == 90.0


def test_a_bad_duration_flag_exits_2_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        _args("--duration", "soon")
    assert exit_.value.code == 2
    assert "--duration: 'soon' is not a duration (use e.g. 15s, 5m" in capsys.readouterr().err


def test_at_takes_unix_seconds_or_rfc3339():
    assert time_of(None, 5.0) == 5.0
    assert time_of("1795000000", 0.0) == 1795000000.0
    assert time_of("2026-11-18T11:06:40Z", 0.0) == 1795000000.0
    with pytest.raises(ValueError, match="RFC 3339"):
        time_of("yesterday", 0.0)


def test_history_settings_window_is_since_with_at_most_60_samples():
    settings = history_settings(_args("--prometheus", "prom:9090", "--selector", '{job="x"}'), 3600)
    prom = settings.prometheus
    assert prom is not None and prom.url == "http://prom:9090" and prom.selector == 'job="x"'
    assert settings.window_seconds == 3600 and settings.evaluation_interval_seconds == 60.0
    assert prom.rate_window_seconds == 120.0 and settings.hold_for_seconds == 0.0
    assert latency_every(settings, 3600) == 4
    short = history_settings(_args("--prometheus", "http://p", "--since", "5m"), 300)
    assert short.evaluation_interval_seconds == 15.0  # Prometheus's default scrape interval
    assert latency_every(short, 300) == 1  # 20 samples: every one
    given = history_settings(_args("--prometheus", "http://p", "--interval", "60"), 3600)
    assert given.evaluation_interval_seconds == 60.0 and given.prometheus.rate_window_seconds == 120


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--prometheus", "http://p", "--log", "x.log"], "only one"),
        (["http://gpu:30000", "--prometheus", "http://p"], "only one"),
        (["--prometheus", "http://p", "--username", "u"], "--password-file go together"),
        (["--prometheus", "http://p", "--selector", "job=~"], "--selector: must be label"),
        (["--prometheus", "ftp://p"], "--prometheus: must be an http"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], says: str, capsys):
    assert run_check(_args(*argv)) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_an_empty_report_still_prints_a_table_and_a_csv_header():
    empty = AdviceList(data=[], count=0)
    assert advice_table(empty) == "no server was judged\n"
    assert advice_table(empty, ["a:1"]).splitlines() == [
        "SERVER  SEVERITY  RULE  ADVICE",
        "a:1     -         -     no advice: every rule with data passed",
    ]
    assert advice_csv(empty).startswith("server,rule,severity,state,flag,current,suggested,")
