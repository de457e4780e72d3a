"""SGLang versions: parsing, comparing, and reading a fact from a version-ordered table (in
`model` so that every floor, the readers and the flag transforms too, compares versions one way).

The facts tables (`flags.py`, `defaults.py`, `backends.py`) were read from the sources of
every SGLang release from 0.4.3 to `NEWEST_KNOWN` (post releases where a change landed in one).
A version that cannot be parsed, or is newer than `NEWEST_KNOWN`, gets the newest behaviour:
`version_note` says so in words the advice can carry.
"""

import functools
import re
from collections.abc import Sequence
from typing import TypeVar

# (major, minor, patch, post). A pre-release ("0.5.0rc0") counts as its release: features
# reached the rc tags first (trtllm_mha is in 0.5.0rc0), and SGLang never shipped a 0.5.0 final.
Version = tuple[int, int, int, int]
NEWEST_KNOWN = "0.5.23"
T = TypeVar("T")

_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?")


@functools.lru_cache(maxsize=256)
def parse_version(version: str | None) -> Version | None:
    """'0.5.14.post2' -> (0, 5, 14, 2), 'v0.5.0rc0' -> (0, 5, 0, 0); None if unparsable."""
    match = _VERSION_RE.match(version.strip()) if version else None
    if match is None:
        return None
    major, minor, patch, post = match.groups()
    return int(major), int(minor), int(patch or 0), int(post or 0)


def release(text: str) -> Version:
    """A table's version literal, parsed; a typo in a table fails at import."""
    parsed = parse_version(text)
    if parsed is None:
        raise ValueError(f"not an SGLang version: {text!r}")
    return parsed


NEWEST: Version = release(NEWEST_KNOWN)


def _padded(minimum: tuple[int, ...]) -> Version:
    """(0, 5, 14) -> (0, 5, 14, 0)."""
    major, minor, patch, post = (*minimum, 0, 0, 0, 0)[:4]
    return major, minor, patch, post


def version_at_least(version: str | None, minimum: tuple[int, ...]) -> bool | None:
    """'0.5.14.post2' >= (0, 5, 14) -> True; None when the version is unknown or unparsable."""
    parsed = parse_version(version)
    return None if parsed is None else parsed >= _padded(minimum)


def effective_version(version: str | None) -> Version:
    """The version whose behaviour applies: the parsed one, else the newest known."""
    return parse_version(version) or NEWEST


def version_note(version: str | None) -> str:
    """Empty for a known version; else why the newest known behaviour was assumed."""
    parsed = parse_version(version)
    if parsed is None:
        return f"SGLang version unknown: assumed {NEWEST_KNOWN}'s flags and defaults"
    if parsed > NEWEST:
        return f"SGLang {version} is newer than {NEWEST_KNOWN}: assumed {NEWEST_KNOWN}'s behaviour"
    return ""


def in_span(version: str | None, since: str, until: str | None = None) -> bool:
    """True when `since <= version < until` (an unknown version is the newest known)."""
    at = effective_version(version)
    return release(since) <= at and (until is None or at < release(until))


def as_of(version: str | None, history: Sequence[tuple[str, T]]) -> T:
    """The value of the last `(since, value)` entry at or before the version (oldest first).

    Before the first entry the first value applies; an unknown version gets the last value.
    """
    at = effective_version(version)
    value = history[0][1]
    for since, candidate in history:
        if release(since) <= at:
            value = candidate
    return value
