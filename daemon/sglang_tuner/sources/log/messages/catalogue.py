"""The catalogue of SGLang's messages (`sglang_messages.json`, package data) and `lookup`: which
message a log line is, with its class.

The index keys each pattern by the first `KEY` characters of its longest literal piece; a line
is looked up by each of its `KEY`-character slices (one dict probe per character), and only the
patterns found that way are matched in full. The longest match (most literal text) wins.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from sglang_tuner.sources.log.messages.classes import FAILURES, Verdict
from sglang_tuner.sources.log.messages.patterns import ANCHOR_MIN, Pattern

DATA = "sglang_messages.json"
KEY = ANCHOR_MIN - 2  # characters of the anchor the index is keyed by


@dataclass(frozen=True, slots=True)
class Message:
    """One catalogued message: how it reads, who prints it, in which versions, its class."""

    pattern: Pattern
    text: str  # the data-file form, `{*}` for each wildcard
    call: str  # raise, assert, error, warning, info
    exception: str
    area: str
    module: str
    versions: str  # runs of releases: "0.4.0..0.4.3.post2, 0.5.1..0.5.23"
    verdict: Verdict
    continues: str = ""  # a later line of a multi-line message: its first line's pattern


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Every message of the data file, and its index."""

    messages: tuple[Message, ...]
    versions_read: tuple[str, ...]
    versions_failed: tuple[str, ...]
    index: dict[str, tuple[Message, ...]]
    # Texts that failures of different classes or kinds print alike ("...evictable_size()={*}"
    # is a later line of a pool OOM and of a leak check): alone, they say neither.
    ambiguous: frozenset[str] = frozenset()

    def lookup(self, line: str) -> Message | None:
        """The catalogued message `line` prints (failures first, then the longest), or None."""
        best: Message | None = None
        for message in self._candidates(line):
            if message.pattern.matches(line) and _better(message, best):
                best = message
        return best

    def _candidates(self, line: str) -> Iterator[Message]:
        index = self.index
        for at in range(len(line) - KEY + 1):
            found = index.get(line[at : at + KEY])
            if found is not None:
                yield from found


def _better(message: Message, than: Message | None) -> bool:
    if than is None:
        return True
    mine = (message.call in FAILURES, message.pattern.literal_chars)
    return mine > (than.call in FAILURES, than.pattern.literal_chars)


def parse(document: dict[str, Any]) -> Catalogue:
    """A catalogue from the data file's content."""
    rows = document["messages"]
    assert isinstance(rows, list)
    messages = tuple(_message(row) for row in rows)
    index: dict[str, list[Message]] = {}
    for message in messages:
        index.setdefault(message.pattern.anchor[:KEY], []).append(message)
    said: dict[str, set[tuple[str, str]]] = {}
    for message in messages:
        if message.call in FAILURES:
            said.setdefault(message.text, set()).add((message.verdict.cls, message.verdict.kind))
    return Catalogue(
        messages,
        tuple(document["versions_read"]),
        tuple(document["versions_failed"]),
        {key: tuple(found) for key, found in index.items()},
        frozenset(text for text, classes in said.items() if len(classes) > 1),
    )


def _message(row: dict[str, str]) -> Message:
    verdict = Verdict(row["class"], row["kind"], row["phase"], row["flag"], row["rule"])
    return Message(
        Pattern.parse(row["pattern"]),
        row["pattern"],
        row["call"],
        row["exception"],
        row["area"],
        row["module"],
        row["versions"],
        verdict,
        row.get("continues", ""),
    )


@cache
def catalogue() -> Catalogue:
    """The shipped catalogue (read once)."""
    text = resources.files(__package__).joinpath(DATA).read_text(encoding="utf-8")
    return parse(json.loads(text))


def lookup(line: str) -> Message | None:
    """The catalogued SGLang message a log line prints, or None."""
    return catalogue().lookup(line)
