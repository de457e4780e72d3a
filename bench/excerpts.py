"""Benchmark: what a short excerpt of a real log says, held against what the whole log says.

Threads quote a few lines of a log, not the log. Each excerpt of a real-log set
(tests/fixtures/sglang/logs/<set>) is cut down to its first and its last 2, 3, 5 and 10 lines
(where the log is longer), and `sglang-tuner check --log FILE --format json` runs on the whole
log and on every cut, as a user runs it. Each cut's next change (rule, flag and way, as
`corpus_score.py` scores it) is then:

- the same as the whole log's;
- less: no flag change where the whole log gives one, or another diagnosis without a flag (a
  crash named generically where the whole log names its kind);
- other: a flag moved where the whole log moves none or moves another: fewer lines said
  something more lines do not bear out (a rule whose condition the rest of the log clears, or
  a crash's numbers the cut lacks);
- opposite: the flag the whole log moves, moved the other way. The count to keep at 0: a short
  excerpt may know less, never the contrary;
- refused: `check --log` gave no report (the cut holds no SGLang line it reads).

A cut whose whole log ends in a named crash and that keeps the log's last line also counts
whether it still names the crash, and whether it still says there was one (named, or as an
unclassified crash with the phase and the traceback's last frame: the exception line that
names it is often further up than the last lines).

    PYTHONPATH=daemon python bench/excerpts.py [--set corpus|holdout|fresh|unseen|unseen2]
                                               [--jobs 2]

Only the corpus (the part rules are written against) is listed cut by cut; the other sets
print their counts alone: their lines are never to be read while rules are written.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus_score as cs  # noqa: E402

SIZES = (2, 3, 5, 10)
SIDES = ("first", "last")
VERDICTS = ("same", "less", "other", "opposite", "refused")


@dataclass(frozen=True)
class Said:
    """A report's next change: its rule, the move it makes, and its crash name."""

    rule: str | None
    move: cs.Move | None
    named: str
    refused: bool

    @classmethod
    def of(cls, report: dict[str, Any]) -> Said:
        step = cs._next_step(report)
        move = cs.advised_move(step.get("action", {})) if step else None
        rule = str(step.get("rule")) if step else None
        return cls(rule, move, cs._named(report), bool(report.get(cs.REFUSED)))

    def __str__(self) -> str:
        if self.refused:
            return "refused"
        if self.rule is None:
            return "no advice"
        return f"{self.rule}: {self.move.flag} {self.move.way}" if self.move else f"{self.rule}"


def verdict(whole: Said, cut: Said) -> str:
    """same / less / other / opposite / refused for one cut against its whole log (`other` and
    `opposite` only where the cut moves a flag the whole log does not move that way)."""
    if cut.refused:
        return "refused"
    if (cut.rule, cut.move) == (whole.rule, whole.move):
        return "same"
    if cut.move is None:
        return "less"  # no change, or another name for the problem with no flag
    if whole.move is not None and (cut.move.flag, cut.move.way) == (
        whole.move.flag,
        whole.move.way,
    ):
        return "same"  # the same move, another rule or value
    return "other"


@dataclass(frozen=True)
class Cut:
    """One cut of one log and what it was judged."""

    file: str
    side: str
    size: int
    said: Said
    verdict: str
    crash: str | None  # a last-lines cut of a log whose crash is named: named, unclassified, ""


def cuts(lines: Sequence[str]) -> list[tuple[str, int, list[str]]]:
    """(side, size, lines) of every cut shorter than the log."""
    out = []
    for size in SIZES:
        if size >= len(lines):
            continue
        out.append(("first", size, list(lines[:size])))
        out.append(("last", size, list(lines[-size:])))
    return out


def one(directory: Path, entry: dict[str, Any], scratch: Path) -> tuple[Said, list[Cut]]:
    """The whole log's next change, and every cut's verdict against it."""
    path = directory / str(entry["file"])
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    whole = Said.of(cs.check(path, quote=False))
    found = []
    for side, size, part in cuts(lines):
        form = scratch / f"{side}{size}-{path.name}"
        form.write_text("\n".join(part) + "\n", encoding="utf-8")
        cut = Said.of(cs.check(form, quote=False))
        crash = cut.named if side == "last" and whole.named == "named" else None
        found.append(Cut(path.name, side, size, cut, verdict(whole, cut), crash))
    return whole, found


def table(found: Sequence[tuple[Said, list[Cut]]]) -> list[str]:
    """Counts per cut (side and size), then in all."""
    rows = [
        "| cut | cuts | same | less | other | opposite | refused | crash still named / said |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    every = [c for _, cs_ in found for c in cs_]
    for side in SIDES:
        for size in SIZES:
            rows.append(
                _row(f"{side} {size}", [c for c in every if (c.side, c.size) == (side, size)])
            )
    rows.append(_row("all", every))
    return rows


def _row(name: str, group: Sequence[Cut]) -> str:
    count = Counter(c.verdict for c in group)
    crash = [c for c in group if c.crash is not None]
    named = sum(1 for c in crash if c.crash == "named")
    said = sum(1 for c in crash if c.crash)
    kept = f"{named} / {said} of {len(crash)}" if crash else "-"
    cells = " | ".join(str(count[v]) for v in VERDICTS)
    return f"| {name} | {len(group)} | {cells} | {kept} |"


def main(argv: Sequence[str] | None = None) -> int:
    args = cs.set_arguments(__doc__.split("\n\n")[0], argv)
    found, seconds = cs.over_set(args.set, args.jobs, one)
    n = sum(len(c) for _, c in found)
    print(f"### {args.set}: {len(found)} logs, {n} cuts ({seconds:.0f} s)\n")
    print("\n".join(table(found)))
    if args.set == "corpus":
        for whole, cut_list in found:
            for c in cut_list:
                if c.verdict in ("other", "opposite") or c.crash == "":
                    print(
                        f"- {c.file} {c.side} {c.size}, {c.verdict}: {c.said} (whole log: {whole})"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
