"""Label strings of an exposition page: parsed (unescaping values), and cached per target, since
a target's label strings repeat on every scrape. The parser (`exposition.py`) leaves them raw.
"""

import re
import sys

_LABEL_RE = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,|$)')
_UNESCAPE_RE = re.compile(r"\\(.)")
_UNESCAPES = {"n": "\n", "\\": "\\", '"': '"'}
_ENTRY_BYTES = 300  # a label cache entry besides its strings: key object, dict, table slot


def parse_labels(raw: str) -> dict[str, str]:
    """Parse a raw label string (`a="1",b="x\\"y"`) into a dict, unescaping values."""
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(raw):
        match = _LABEL_RE.match(raw, pos)
        if match is None:
            if raw[pos:].strip(" \t,") == "":
                break
            raise ValueError(f"bad label set {raw[:60]!r}")
        value = match.group(2)
        if "\\" in value:
            value = _UNESCAPE_RE.sub(lambda m: _UNESCAPES.get(m.group(1), "\\" + m.group(1)), value)
        labels[match.group(1)] = value
        pos = match.end()
    return labels


class LabelCache:
    """Memoised `parse_labels`: a target's label strings repeat on every scrape.

    Bounded in bytes, not entries: label values that change on every scrape (a request id, a
    timestamp) would fill it with long strings never asked for again, so past `max_bytes` it
    starts over (a real page's label strings take a few KiB). With `keep`, only those label
    names are stored (values interned): the cache lives as long as its target. With `key`, each
    entry also holds the values of those labels as a tuple ("" where absent): `entry`.
    """

    def __init__(
        self,
        max_bytes: int = 256 * 1024,
        keep: frozenset[str] | None = None,
        key: tuple[str, ...] = (),
    ) -> None:
        self._cache: dict[str | bytes, tuple[dict[str, str], tuple[str, ...]]] = {}
        self._max_bytes = max_bytes
        self._keep = keep
        self._key = key
        self.size_bytes = 0  # roughly what the entries take

    def __call__(self, raw: str | bytes) -> dict[str, str]:
        """Labels of `raw`, parsed once; the returned dict must not be mutated."""
        return self.entry(raw)[0]

    def entry(self, raw: str | bytes) -> tuple[dict[str, str], tuple[str, ...]]:
        """Labels of `raw` and the values of the `key` labels, parsed once."""
        entry = self._cache.get(raw)
        if entry is None:
            labels = parse_labels(raw.decode(errors="replace") if isinstance(raw, bytes) else raw)
            if self._keep is not None:
                labels = {k: sys.intern(v) for k, v in labels.items() if k in self._keep}
            entry = labels, tuple(labels.get(name, "") for name in self._key)
            size = _ENTRY_BYTES + 2 * len(raw)  # the key, and values at most as long
            if self.size_bytes + size > self._max_bytes:
                self._cache.clear()
                self.size_bytes = 0
            if size <= self._max_bytes:
                self._cache[raw] = entry
                self.size_bytes += size
        return entry
