"""A log's history replayed through the loop: the daemon's own rules, plan and alert state."""

from argparse import Namespace

from sglang_tuner.cli.check import log_settings
from sglang_tuner.loop.replay import replay
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.log.log_samples import log_samples

SETTINGS = log_settings(Namespace(interval=None, window=300.0))


def _line(second: int, usage: float, queued: int) -> str:
    stamp = f"2026-01-01 {second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
    return (
        f"[{stamp} TP0] Decode batch, #running-req: 100, #token: 250000, token usage: {usage:.2f}, "
        f"cuda graph: True, gen throughput (token/s): 3000.00, #queue-req: {queued}"
    )


def test_replay_fires_the_guides_advice_at_the_logs_end_from_the_log_alone():
    lines = [_line(t, 0.50, 300) for t in range(0, 600, 2)]  # ten minutes: queued, pool half full
    spec = TargetSpec("gpu-a", "log:gpu-a.log")
    ev = replay(SETTINGS, spec, log_samples(lines, 5.0))
    plan = ev.plans["gpu-a"]
    assert plan.next is not None and plan.next.rule == "scheduler_too_conservative"
    assert [a.state for a in ev.advice if a.rule == "scheduler_too_conservative"] == ["firing"]
    assert ev.targets["gpu-a"].signal_sources["token_usage"] == "log"


def test_replay_only_the_window_before_the_end_is_judged():
    early = [_line(t, 0.50, 300) for t in range(0, 600, 2)]  # a queue long ago
    late = [_line(t, 0.95, 0) for t in range(600, 1200, 2)]  # then ten quiet minutes
    ev = replay(SETTINGS, TargetSpec("gpu-a", "log:x"), log_samples(early + late, 5.0))
    assert "scheduler_too_conservative" not in {a.rule for a in ev.advice}


def test_replay_reports_progress_on_long_logs():
    seen: list[tuple[int, float]] = []
    lines = [_line(t, 0.5, 0) for t in range(12_000)]  # 12,000 samples of one second
    spec = TargetSpec("gpu-a", "log:x")
    replay(SETTINGS, spec, log_samples(lines, 1.0), lambda n, secs: seen.append((n, secs)))
    assert seen == [(10_000, 9_999.0)]
