"""A short excerpt of a real log (tests/fixtures/sglang/logs/corpus) held against the whole log,
as threads quote a few lines (`bench/excerpts.cuts`: the first and the last 2, 3, 5 and 10
lines). A cut may know less than the whole log, never the contrary: its next change never
moves the whole log's flag the other way, and a cut that keeps the end of a log that ends in
a crash still says there was a crash.

Not held: last lines that a pool OOM and a leak check both print (the pool's available and
evictable sizes, `self.tree_cache.evictable_size()=0`: alone, they say neither), and a leak
warning's `warnings.warn(msg)` echo without the warning. Every other line of a pool OOM's
message names it alone (`test_crash_catalogue.py`).
"""

import sys
from argparse import Namespace
from pathlib import Path

import pytest
import yaml
from sglang_tuner.cli.check import log_settings
from sglang_tuner.loop.replay import replay
from sglang_tuner.model.advice import Severity
from sglang_tuner.model.next_change import Step
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.log.log_samples import log_samples

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from corpus_score import Move, _opposite, advised_move  # noqa: E402
from excerpts import cuts  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs" / "corpus"
ENTRIES = yaml.safe_load((CORPUS / "index.yaml").read_text())
SETTINGS = log_settings(Namespace(interval=None, window=300.0))
# Last lines that print what a pool OOM and a leak check both print ("...available_size()=N",
# "...evictable_size()=N"): alone, they say neither crash.
CRASH_NOT_KEPT = {
    ("dsv3-page64-decode-oom-free-exceeds-request.log", 2),
    ("semi-pd-allocator-leak-warning-7-tokens.log", 2),
}


def _judged(name: str, lines: list[str]) -> tuple[Move | None, bool]:
    """(the next change's move, whether any advice names a crash) for a replay of `lines`."""
    ev = replay(SETTINGS, TargetSpec(name, f"log:{name}"), log_samples(lines, 5.0))
    plan = ev.plans.get(name)
    step: Step | None = plan.next if plan is not None else None
    move = None
    if step is not None:
        a = step.action
        said = {"flag": a.flag, "current": a.current, "suggested": a.suggested, "text": a.text}
        move = advised_move(said)
    crash = any(a.target == name and a.severity == Severity.CRITICAL for a in ev.advice)
    return move, crash


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_a_short_excerpt_knows_less_never_the_contrary(entry: dict[str, object]) -> None:
    name = str(entry["file"])
    lines = (CORPUS / name).read_text(encoding="utf-8", errors="replace").splitlines()
    whole, crashed = _judged(name, lines)
    for side, size, part in cuts(lines):
        move, crash = _judged(name, part)
        if whole is not None and move is not None:
            assert not _opposite(move, whole), f"{side} {size}: {move} against {whole}"
        if side == "last" and crashed and (name, size) not in CRASH_NOT_KEPT:
            assert crash, f"the last {size} lines no longer say the log ends in a crash"
        elif side == "last" and (name, size) in CRASH_NOT_KEPT:
            assert not crash, f"the last {size} lines say the crash now: not CRASH_NOT_KEPT"


def test_cuts_are_the_first_and_last_lines_shorter_than_the_log() -> None:
    lines = [f"line {i}" for i in range(6)]
    got = {(side, size): part for side, size, part in cuts(lines)}
    assert set(got) == {("first", 2), ("last", 2), ("first", 3), ("last", 3),
                        ("first", 5), ("last", 5)}  # fmt: skip
    assert got[("last", 3)] == ["line 3", "line 4", "line 5"]
    assert got[("first", 2)] == ["line 0", "line 1"]
