"""Benchmark: a real log read the same in every form a user hands it over in.

Each excerpt of a real-log set (tests/fixtures/sglang/logs/<set>) is rewritten behind a log
tool's wrapper (docker compose, `kubectl logs --timestamps`, journalctl's short and short-iso,
docker's json-file lines, Google Cloud Logging's printed entries, CRLF ends) and as a paste
decorates it (quoted, indented, numbered, interleaved with another process's lines, its newlines
lost, cut at a terminal's 120 columns), listed newest first as log viewers and `journalctl -r`
show it, each wrapper's stamp from the line's own time where it prints one. `sglang-tuner check
--log FILE --format json` runs on the original and on every form, as a user runs it, and the
form counts as read the same when the next change (rule, flag and way, as `corpus_score.py`
scores it), whether its crash is named and whether the log is refused are the original's.

    PYTHONPATH=daemon python bench/paste_forms.py [--set corpus|holdout|fresh|unseen|unseen2]
                                                  [--jobs 2]

Only the corpus (the part rules are written against) is listed log by log; the other sets
print their counts alone: their lines are never to be read while rules are written.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus_score as cs  # noqa: E402

_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})")
_PROBE = (
    '10.0.0.7 - - [29/Nov/2026:07:05:18 +0000] "GET /health HTTP/1.1" 200 2 "-" "kube-probe/1.29"'
)
Form = Callable[[Sequence[str], Sequence[datetime]], list[str]]


def times(lines: Sequence[str]) -> list[datetime]:
    """Each line's time as a wrapper would stamp it: the line's own, else the last one seen."""
    last, out = datetime(2026, 11, 29, 7, 0, 0), []
    for line in lines:
        found = _STAMP.search(line[:80])
        if found:
            try:
                last = datetime.fromisoformat(f"{found.group(1)} {found.group(2)}")
            except ValueError:
                pass
        out.append(last)
    return out


def _interleaved(lines: Sequence[str], _: Sequence[datetime]) -> list[str]:
    out = []
    for k, line in enumerate(lines):
        out.append(line)
        if k % 3 == 2:
            out.append(_PROBE)
    return out


def _cut(lines: Sequence[str], _: Sequence[datetime], width: int = 120) -> list[str]:
    return [line[i : i + width] for line in lines for i in range(0, max(1, len(line)), width)]


def _stamped(layout: str) -> Form:
    return lambda lines, ts: [
        layout.format(t=t, k=k % 1000, line=line)
        for k, (line, t) in enumerate(zip(lines, ts, strict=True))
    ]


def _json_file(lines: Sequence[str], ts: Sequence[datetime]) -> list[str]:
    return [
        json.dumps({"log": line + "\n", "stream": "stderr", "time": f"{t:%Y-%m-%dT%H:%M:%S}.0Z"})
        for line, t in zip(lines, ts, strict=True)
    ]


# The forms: a log tool's wrapper, then a paste's decorations.
FORMS: dict[str, Form] = {
    "docker compose": _stamped("sglang-1  | {line}"),
    "kubectl --timestamps": _stamped("{t:%Y-%m-%dT%H:%M:%S}.{k:03d}456789Z {line}"),
    "journalctl short": _stamped("{t:%b %d %H:%M:%S} gpu-node-3 python3[4242]: {line}"),
    "journalctl short-iso": _stamped("{t:%Y-%m-%dT%H:%M:%S}+0000 gpu-node-3 python3[4242]: {line}"),
    "docker json-file": _json_file,
    "Cloud Logging": _stamped("INFO {t:%Y-%m-%dT%H:%M:%S}.{k:03d}000000Z {line}"),
    "CRLF": _stamped("{line}\r"),
    "quoted": _stamped("> {line}"),
    "indented": _stamped("    {line}"),
    "numbered": lambda lines, _: [f"{k + 1:5d}  {line}" for k, line in enumerate(lines)],
    "interleaved": _interleaved,
    "newlines lost": lambda lines, _: [" ".join(lines)],
    "cut at 120 columns": _cut,
    # a log viewer's newest-first order (Grafana, Cloud Logging, Kibana): a line a record
    "newest first": lambda lines, _: list(reversed(lines)),
    "journalctl -r": lambda lines, ts: list(reversed(FORMS["journalctl short-iso"](lines, ts))),
}


NEWEST_FIRST = {"newest first", "journalctl -r"}


def orderless(lines: Sequence[str]) -> bool:
    """Nothing in the excerpt tells its first line from its last: fewer than three distinct
    times and no traceback (a newest-first listing of it cannot be told from the original)."""
    return len(set(times(lines))) < 3 and not any("Traceback (most recent" in x for x in lines)


def said(report: dict[str, Any]) -> tuple[str, str, bool]:
    """What a report's next change does, whether its crash is named, whether it was refused."""
    step = cs._next_step(report)
    move = cs.advised_move(step.get("action", {})) if step else None
    return cs._said(step, move), cs._named(report), bool(report.get(cs.REFUSED))


def one(directory: Path, entry: dict[str, Any], scratch: Path) -> tuple[str, list[str], bool]:
    """(file, the forms read differently from the original, whether it is `orderless`: its
    newest-first forms are not read) for one excerpt."""
    path = directory / str(entry["file"])
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    stamps = times(lines)
    base = said(cs.check(path, quote=False))
    moved, unordered = [], orderless(lines)
    for k, (name, build) in enumerate(FORMS.items()):
        if unordered and name in NEWEST_FIRST:
            continue
        form = scratch / f"{k}-{path.name}"
        form.write_text("\n".join(build(lines, stamps)) + "\n", encoding="utf-8")
        if said(cs.check(form, quote=False)) != base:
            moved.append(name)
    return path.name, moved, unordered


def main(argv: Sequence[str] | None = None) -> int:
    args = cs.set_arguments(__doc__.split("\n\n")[0], argv)
    found, seconds = cs.over_set(args.set, args.jobs, one)
    print(f"### {args.set}: {len(found)} logs x {len(FORMS)} forms ({seconds:.0f} s)\n")
    print("| form | read as the original | read differently |\n|---|---:|---:|")
    unordered = sum(1 for _, _, skipped in found if skipped)
    for name in FORMS:
        moved = sum(1 for _, forms, _ in found if name in forms)
        held = len(found) - (unordered if name in NEWEST_FIRST else 0)
        print(f"| {name} | {held - moved} | {moved} |")
    same = sum(1 for _, forms, _ in found if not forms)
    print(f"| every form | {same} | {len(found) - same} |")
    print(
        f"\nNewest first: {unordered} of {len(found)} excerpts show neither a traceback nor three "
        "distinct times (nothing in them tells their first line from their last), not counted."
    )
    if args.set == "corpus":
        for name, forms, _ in found:
            if forms:
                print(f"- {name}: {', '.join(forms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
