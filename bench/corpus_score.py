"""The next change on real logs, scored against what each thread found.

Runs `sglang-tuner check --log FILE --format json` on every log of the real-log corpus
(tests/fixtures/sglang/logs/corpus, the part rules are written against) and of the holdout
(tests/fixtures/sglang/logs/holdout, never read while writing rules), or of the fresh set
(tests/fixtures/sglang/logs/fresh: threads drawn after both, from threads no file of the project
named, scored as drawn), or of the unseen set (tests/fixtures/sglang/logs/unseen: drawn the same
way after the fresh set was scored; unseen2 after the unseen set was) and holds the next change
against the entry's `fix_flag` (or its structured `fix_moves` / `worse_moves`) in index.yaml:

- match: the next change moves the thread's fix flag in the fix's direction; for a bug or
  not-a-tuning-problem entry, it changes no flag and names that diagnosis (for a
  not-a-tuning-problem log that does not end in a crash, "next change: none" names it: the log
  holds nothing to tune); for a healthy server or one bound by its client, it changes no flag;
  a log `check --log` refuses is never a match;
- harmful: it moves a fix flag the opposite way, or a flag the thread showed makes it worse;
- miss: anything else, no advice included;
- no fix: the thread found no fix (unresolved), so only harmful is possible.

A log that ends in a crash is also checked for a named diagnosis: any advice on it at
critical severity, or predicted on crashes, or from a crash rule; "unclassified" counts those
whose only name is the generic "unclassified crash" fallback.

    PYTHONPATH=daemon python bench/corpus_score.py [--set corpus|holdout|fresh|unseen|unseen2|both]
                                                   [--verbose]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

Json = dict[str, Any]
T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "sglang" / "logs"
# fresh, unseen, unseen2: threads drawn after the holdout (each after the one before was
# scored), scored once
SETS = ("corpus", "holdout", "fresh", "unseen", "unseen2")
SCORING_ONLY = ("fresh", "unseen", "unseen2")
CRASH_KINDS = {
    "startup_not_enough_memory",
    "startup_cuda_oom",
    "cuda_graph_capture_oom",
    "capture_failure_not_oom",
    "prefill_oom",
    "decode_oom",
    "kv_pool_exhausted",
    "other_crash",
}
# kinds whose right answer is a diagnosis, not a flag change
DIAGNOSES = {
    "allocator_bug": {"allocator_bug"},
    "not_a_tuning_problem": set(),
    "other_crash": set(),
    "capture_failure_not_oom": set(),
}
CRASH_RULES = {
    "allocator_bug",
    "cuda_graph_capture_oom",
    "kv_pool_exhausted",
    "startup_not_enough_memory",
    "prefill_oom",
    "decode_oom",
}
NO_FIX = {"none", "unresolved", ""}
REFUSED = "_refused"  # marks the empty report of a log `check --log` gave no report on
# kinds whose right answer is no server flag change at all
NO_CHANGE = {"healthy", "client_bound"}
_ARROW = re.compile(r"(--[a-z0-9-]+)\s+(\S+)\s*->\s*(?:>=\s*)?(-?[0-9.]+)")
_WORDS = {"lowered": "down", "lower": "down", "raised": "up", "raise": "up"}


@dataclass(frozen=True)
class Move:
    """A flag moved one way: up, down, on, off (a boolean), or to a value."""

    flag: str
    way: str
    current: float | None = field(default=None, compare=False)


def parse_moves(text: str) -> list[Move]:
    """The moves a fix_flag text (or a fix_moves item) names: `--flag A -> B`, `--flag down`,
    `--flag lowered`, `remove --flag`, a bare `--disable-x`, `--flag 28`; alternatives split
    on ' / ' or ' or '."""
    moves = []
    for part in re.split(r"\s+/\s+|\s+or\s+|;\s*", text):
        if move := _one_move(part.strip()):
            moves.append(move)
    return moves


def _one_move(part: str) -> Move | None:
    if m := _ARROW.search(part):
        old, new = _number(m.group(2)), _number(m.group(3))
        if old is not None and new is not None and old != new:
            return Move(m.group(1), "up" if new > old else "down")
    m = re.search(r"(remove|drop|disable)\s+(--[a-z0-9-]+)", part)
    if m:
        return Move(m.group(2), "off")
    m = re.search(r"(--[a-z0-9-]+)\s*(\S*)", part)
    if m is None:
        return None
    flag, word = m.group(1), m.group(2).strip("(),")
    if word in ("up", "down", "on", "off"):
        return Move(flag, word)
    if word in _WORDS:
        return Move(flag, _WORDS[word])
    if _number(word) is not None:
        return Move(flag, "=" + word)
    return Move(flag, "on")


def _number(text: str) -> float | None:
    try:
        return float(text.strip("x%,"))
    except ValueError:
        return None


def advised_move(action: Json) -> Move | None:
    """The move a next change's action makes (None: it changes no flag)."""
    flag = action.get("flag")
    if not flag:
        return None
    current, suggested = str(action.get("current") or ""), str(action.get("suggested") or "")
    low = suggested.lower()
    if low in ("false", "off", "no", "remove", "unset"):
        return Move(str(flag), "off")
    if low in ("true", "on", "yes", "set"):
        return Move(str(flag), "on")
    old, new = _number(current), _number(suggested)
    if old is not None and new is not None and old != new:
        return Move(str(flag), "up" if new > old else "down", old)
    if suggested.startswith(("+", "-")) and _number(suggested) is not None:
        return Move(str(flag), "up" if suggested.startswith("+") else "down")
    if suggested:
        return Move(str(flag), "=" + suggested)
    return Move(str(flag), _way_in_words(str(action.get("text") or "")))


def _way_in_words(text: str) -> str:
    """The direction an action's text gives where it has no machine value."""
    words = set(re.findall(r"[a-z]+", text.lower()))
    if words & {"above", "raise", "higher", "increase", "more"}:
        return "up"
    if words & {"below", "lower", "reduce", "decrease", "smaller", "less"}:
        return "down"
    return "on"


def _same(advised: Move, wanted: Move) -> bool:
    if advised.flag != wanted.flag:
        return False
    if wanted.way.startswith("="):
        return advised.way == wanted.way or _towards(advised, _number(wanted.way[1:]))
    return advised.way == wanted.way


def _towards(advised: Move, target: float | None) -> bool:
    """An up/down move from a known current value towards the thread's value."""
    if target is None or advised.current is None or advised.way not in ("up", "down"):
        return False
    return (advised.way == "up") == (target > advised.current)


def _opposite(advised: Move, wanted: Move) -> bool:
    pairs = {("up", "down"), ("down", "up"), ("on", "off"), ("off", "on")}
    return advised.flag == wanted.flag and (advised.way, wanted.way) in pairs


@dataclass
class Verdict:
    """One log's score."""

    file: str
    kind: str
    score: str
    crash: bool
    named: str
    said: str


def wanted_moves(entry: Json) -> list[Move]:
    """The fix as moves: `fix_moves` where given, else parsed from `fix_flag`."""
    items = entry.get("fix_moves")
    if isinstance(items, list):
        return [m for item in items for m in parse_moves(str(item))]
    text = str(entry.get("fix_flag") or "").strip()
    return [] if text.lower() in NO_FIX | {"bug", "upgrade"} else parse_moves(text)


def worse_moves(entry: Json) -> list[Move]:
    """Moves the thread showed make it worse (`worse_moves`)."""
    items = entry.get("worse_moves") or []
    return [m for item in items for m in parse_moves(str(item))]


def score(entry: Json, report: Json) -> Verdict:
    """Match / harmful / miss / no fix for one log's report."""
    name, kind = str(entry["file"]), str(entry["kind"])
    step = _next_step(report)
    action = step.get("action", {}) if step else {}
    move = advised_move(action) if step else None
    said = _said(step, move)
    crash = bool(entry.get("ends_in_crash", kind in CRASH_KINDS))
    judged = _judge(entry, kind, step, move, crash)
    if report.get(REFUSED) and judged == "match":
        judged, said = "miss", "refused"
    return Verdict(name, kind, judged, crash, _named(report), said)


def _judge(entry: Json, kind: str, step: Json | None, move: Move | None, crash: bool) -> str:
    wanted, worse = wanted_moves(entry), worse_moves(entry)
    if move is not None and (
        any(_opposite(move, w) for w in wanted) or any(_same(move, w) for w in worse)
    ):
        return "harmful"
    if wanted:
        return "match" if move is not None and any(_same(move, w) for w in wanted) else "miss"
    fix = str(entry.get("fix_flag") or "").strip().lower()
    if kind in NO_CHANGE:
        return "match" if move is None else "miss"
    if kind == "not_a_tuning_problem" and not crash and step is None:
        return "match"  # nothing to change: the log holds no tuning problem
    if fix in ("bug", "upgrade") or kind in ("allocator_bug", "not_a_tuning_problem"):
        return "match" if move is None and _diagnosis(kind, step) else "miss"
    return "no fix"


def _diagnosis(kind: str, step: Json | None) -> bool:
    if step is None:
        return False
    if step.get("rule") in DIAGNOSES.get(kind, set()):
        return True
    text = str(step.get("action", {}).get("text", "")).lower()
    return "not a tuning problem" in text or " bug" in text


def _next_step(report: Json) -> Json | None:
    for plan in report.get("plans", []) or []:
        step = plan.get("next")
        if isinstance(step, dict):
            return step
    return None


def _named(report: Json) -> str:
    """'named', 'unclassified' (only the generic crash fallback) or '' for one log's report."""
    names = [a for a in report.get("data", []) or [] if _is_crash_advice(a)]
    if not names:
        return ""
    generic = all("unclassified crash" in str(a.get("action", {}).get("text", "")) for a in names)
    return "unclassified" if generic else "named"


def _is_crash_advice(advice: Json) -> bool:
    prediction = (advice.get("action") or {}).get("prediction", {}) or {}
    return (
        advice.get("severity") == "critical"
        or advice.get("rule") in CRASH_RULES
        or prediction.get("objective") == "crashes"
    )


def _said(step: Json | None, move: Move | None) -> str:
    if step is None:
        return "no advice"
    what = f"{move.flag} {move.way}" if move else "no flag"
    return f"{step.get('rule')}: {what}"


def check(path: Path, quote: bool = True) -> Json:
    """`sglang-tuner check --log PATH --format json`, as a user runs it. Without `quote`, a
    refusal is said without the tool's message: it quotes the log's lines, and a holdout's or
    a scoring set's lines are never to be read while rules are written."""
    cmd = [sys.executable, "-m", "sglang_tuner", "check", "--log", str(path), "--format", "json"]
    env = {"PYTHONPATH": str(ROOT / "daemon"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    try:
        report = json.loads(out.stdout)
    except json.JSONDecodeError:
        report = None
    if isinstance(report, dict):
        return report
    said = out.stderr.strip()[-300:] if quote else "(its message is withheld: it quotes the log)"
    print(f"{path.name}: check --log gave no report: {said}", file=sys.stderr)
    return {"plans": [], "data": [], REFUSED: True}


def score_set(name: str, jobs: int) -> list[Verdict]:
    """Every log of one set, scored."""
    entries = yaml.safe_load((LOGS / name / "index.yaml").read_text(encoding="utf-8")) or []
    with ThreadPoolExecutor(jobs) as pool:
        reports = list(
            pool.map(lambda e: check(LOGS / name / str(e["file"]), name == "corpus"), entries)
        )
    return [score(e, r) for e, r in zip(entries, reports, strict=True)]


def over_set(name: str, jobs: int, one: Callable[[Path, Json, Path], T]) -> tuple[list[T], float]:
    """`one(directory, entry, scratch)` for every log of a set, `jobs` at a time, each with a
    scratch directory for the files it writes; and the seconds it took (the benchmarks that
    rewrite a set's logs: `paste_forms.py`, `excerpts.py`)."""
    directory = LOGS / name
    entries = yaml.safe_load((directory / "index.yaml").read_text(encoding="utf-8")) or []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(jobs) as pool:
        found = list(pool.map(lambda e: one(directory, e, Path(scratch)), entries))
    return found, time.perf_counter() - start


def set_arguments(description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """`--set` (one set, the corpus by default) and `--jobs`, as those benchmarks take them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--set", default="corpus", choices=SETS)
    parser.add_argument("--jobs", type=int, default=2)
    return parser.parse_args(argv)


def table(name: str, verdicts: list[Verdict], verbose: bool) -> str:
    """A Markdown table per kind and the set's totals."""
    rows = [f"### {name} ({len(verdicts)} logs)", ""]
    rows += [
        "| kind | logs | match | harmful | miss | no fix | crash named (unclassified) |",
        "|---" * 7 + "|",
    ]
    kinds = sorted({v.kind for v in verdicts})
    for kind in [*kinds, "total"]:
        got = [v for v in verdicts if kind in (v.kind, "total")]
        rows.append(_row(kind, got))
    if verbose:
        rows += ["", *(_line(v) for v in verdicts)]
    return "\n".join(rows)


def _line(verdict: Verdict) -> str:
    crash = f"; crash {verdict.named or 'not named'}" if verdict.crash else ""
    return f"- {verdict.file}: {verdict.score} ({verdict.said}){crash}"


def _row(kind: str, got: list[Verdict]) -> str:
    count = Counter(v.score for v in got)
    crashes = [v for v in got if v.crash]
    named = sum(bool(v.named) for v in crashes)
    generic = sum(v.named == "unclassified" for v in crashes)
    named_cell = f"{named}/{len(crashes)} ({generic})" if crashes else "-"
    cells = [count[s] for s in ("match", "harmful", "miss", "no fix")]
    return f"| {kind} | {len(got)} | " + " | ".join(map(str, cells)) + f" | {named_cell} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--set", choices=(*SETS, "both"), default="both", help="both: corpus and holdout"
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--verbose", action="store_true", help="one line per log")
    args = parser.parse_args()
    for name in [s for s in SETS if s not in SCORING_ONLY] if args.set == "both" else (args.set,):
        print(table(name, score_set(name, args.jobs), args.verbose), end="\n\n")


if __name__ == "__main__":
    main()
