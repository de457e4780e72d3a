"""The Prometheus mode's start (loop/backfill.py): how far back alert state is rebuilt, per rule.

The fill itself runs against a real Prometheus in tests/sources/prometheus/test_history_e2e.py."""

from sglang_tuner.config.settings import RuleSettings, Settings
from sglang_tuner.judge import hold_for, keep_firing_for
from sglang_tuner.loop.backfill import longest_hold
from sglang_tuner.rules import RULES_BY_ID

SETTINGS = Settings(
    hold_for_seconds=120.0,
    keep_firing_for_seconds=30.0,
    rules={"queue_too_long": RuleSettings(hold_for_seconds=600.0, keep_firing_for_seconds=0.0)},
)


def test_a_rules_own_for_and_keep_firing_for_win_over_the_global_ones():
    assert hold_for(SETTINGS, "queue_too_long") == 600.0
    assert keep_firing_for(SETTINGS, "queue_too_long") == 0.0  # 0 is a setting, not "unset"
    assert hold_for(SETTINGS, "queue_empty") == 120.0
    assert keep_firing_for(SETTINGS, "queue_empty") == 30.0


def test_the_history_covers_the_longest_for_of_the_rules_judged():
    both = [RULES_BY_ID["queue_too_long"], RULES_BY_ID["queue_empty"]]
    assert longest_hold(SETTINGS, both) == 600.0
    assert longest_hold(SETTINGS, [RULES_BY_ID["queue_empty"]]) == 120.0
    assert longest_hold(SETTINGS, []) == 0.0
