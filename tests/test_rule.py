"""The rule model helpers: flag/choice actions, versions, and the test series notation."""

import math

import pytest
from helpers import parse_series, rule_input, window_from
from sglang_tuner.rule import choice_action, flag_action
from sglang_tuner.rules.queue import QUEUE_TOO_LONG
from sglang_tuner.rules.sglang.versions import version_at_least


def _inp(**kwargs):
    return rule_input(QUEUE_TOO_LONG, window_from(num_queue_reqs="1x6"), **kwargs)


def test_flag_action_formats_current_and_suggested():
    action = flag_action("--schedule-conservativeness", 1.0, 0.7, _inp())
    assert action.text == "--schedule-conservativeness 1 -> 0.7"
    assert (action.current, action.suggested, action.note) == ("1", "0.7", "")


def test_choice_action_formats_string_values():
    action = choice_action("--schedule-policy", "lpm", "fcfs", _inp())
    assert action.text == "--schedule-policy lpm -> fcfs"
    assert (action.flag, action.current, action.suggested) == ("--schedule-policy", "lpm", "fcfs")


def test_choice_action_unknown_current_with_and_without_default():
    action = choice_action(
        "--kv-cache-dtype", None, "fp8_e4m3", _inp(config=None, config_error="x"), "auto"
    )
    assert action.text == "--kv-cache-dtype auto -> fp8_e4m3"
    assert action.note == "current value unknown (x); assumed SGLang's default auto"
    action = choice_action("--attention-backend", None, "fa3", _inp())
    assert action.text == "--attention-backend ? -> fa3"
    assert (
        action.note
        == "current value unknown (neither /server_info nor the log's launch line said it)"
    )


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.5.14", True),
        ("0.5.14.post2", True),
        ("v0.5.14rc1", True),
        ("0.5.9.post3", False),
        ("0.6.0", True),
        ("0.4.3.post4", False),
        (None, None),
        ("main", None),
    ],
)
def test_version_at_least(version, expected):
    assert version_at_least(version, (0, 5, 14)) is expected


def test_parse_series_notation():
    values = parse_series("0.5x3 _ 1 _x2")
    assert values == [0.5, 0.5, 0.5, None, 1.0, None, None]


def test_window_from_builds_real_window_view():
    view = window_from(step_seconds=15, token_usage="0.8x4", num_queue_reqs="5 _ 5 5")
    assert view.count == 4
    assert list(view.ts) == [0.0, 15.0, 30.0, 45.0]
    assert view.window_seconds == 60.0
    assert view.present("num_queue_reqs") == 3
    assert math.isnan(view.columns["num_queue_reqs"][1])


def test_window_from_rejects_uneven_series():
    with pytest.raises(ValueError, match="series lengths differ"):
        window_from(token_usage="0.8x4", num_queue_reqs="5x3")
