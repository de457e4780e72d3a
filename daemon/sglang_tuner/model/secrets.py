"""Secrets kept out of everything the daemon shows: a URL's `user:password@`, query parameters
that carry credentials (`?token=…`, `&X-Amz-Signature=…`) and secret flags of a command line
(`--api-key X`), redacted.

Every string here may be hostile (a prompt logged by `--log-requests`, a gateway's worker URL,
a `/server_info` field), so every pattern runs in time linear in the text: an attempt starts
only at a literal the engine skips to at C speed (`://`, `--`, a `?&;` separator) and scans one
run of name characters, each character a bounded number of times however many attempts the
run holds. The old `(\\w+://)[^/\\s]*@` retried at every character of a run: 4.6 s on 40,000.

A value is replaced without a Python call per match: `split` hands back the kept name and the
value as pieces, the value pieces are swapped for `<redacted>` in one slice and the pieces are
joined (1 MB holding 100,000 secret flags: 50 ms of CPU with a callback, 35 ms this way).

Text holding a secret's keyword runs the patterns only where they can match: each keyword is
found by a C-speed `find` on a lower-cased copy, then the flag (or query name) around it is
checked from the last `--` (or `?&;`) before it. One step a keyword, a whole run or value passed
at once, where the patterns take one attempt a `--` or separator (1 MB of `--ta` or `?a=` with
a secret at the end: 74-81 ms of CPU before, 9 ms this way). Where keywords come about as often
as the separators (a secret every 10 bytes) the steps would cost more than the attempts, and
the patterns take the rest of the text over.
"""

import re
import sys
from collections.abc import Callable

REDACTED = "<redacted>"
# A URL's `user:password@`: up to the last "@" before the path (a password may hold a raw "@";
# urllib splits there too).
# The literal "://" first lets the engine skip to each one at C speed.
_USERINFO = re.compile(r"://(?<=\w://)[^/\s]*@")
# A query parameter whose name says it carries a credential (presigned URLs, tokens in links).
# Group 1 is kept, group 2 (the value) replaced. The name must run up to an "=" (a cheap scan)
# before the keyword is looked for in it.
_QUERY_WORDS = ("token", "key", "secret", "password", "passwd", "sig", "credential", "auth")
_QUERY_SECRET = re.compile(
    r"([?&;](?=[\w.-]*=)"
    r"(?=[\w.-]*?(?:token|key|secret|password|passwd|sig|credential|auth))[\w.-]*=)"
    r"([^&#\s\"']+)",
    re.IGNORECASE,
)
# A secret flag of a command line (`launch_command` is the raw command): `--api-key X`,
# `--admin-api-key=X`, `--ssl-keyfile-password X`, any *password/secret/token* flag; never a
# value that is itself a flag. The name is the run of [\w-] holding the "--"; an attempt starts
# at the last "-" pair of a dash run (`--(?!-)`), and the output keeps the name whole, so
# starting in the run's middle changes nothing.
_FLAG_WORDS = ("api-key", "api_key", "password", "secret", "credential", "token")
_FLAG_WORD = r"(?:api[-_]key|password|secret|credential|token)"
_FLAG_VALUE = r"(?:=|\s+))(?!--)(\S+)"
# Text where every run holding "--" starts with it (no "x--" inside a run): one attempt a run.
_SECRET_FLAG = re.compile(
    r"(--(?!-)(?=[\w-]*?" + _FLAG_WORD + r")[\w-]*" + _FLAG_VALUE, re.IGNORECASE
)
_INNER_DASHES = re.compile(r"--(?<=\w--)")
# Any text: a run may hold several "--" (`a--b--token x`), one attempt at each. An attempt looks
# for the keyword only up to the run's next "--" (its segment), and its scan to the run's end
# stops before a later segment that holds a keyword (that segment's attempt takes over), so a
# character is scanned by its own segment's attempt and at most one before it. The scan is
# atomic (`(?=(?P<rest>…))(?P=rest)`): a failed separator never backtracks through it. The
# `rest` group is dropped from the output.
_IN_SEGMENT = r"\w*?(?:-(?!-)\w*?)*?" + _FLAG_WORD
_TO_RUN_END = r"\w*(?:-\w+|--+(?!" + _IN_SEGMENT + r")\w+)*-*"
_SECRET_FLAG_IN_RUNS = re.compile(
    r"(--(?!-)(?=" + _IN_SEGMENT + r")(?=(?P<rest>" + _TO_RUN_END + r"))(?P=rest)" + _FLAG_VALUE,
    re.IGNORECASE,
)
# The only characters whose `lower()` is not the ASCII letter IGNORECASE matches them as in a
# keyword ("ſ" is an "s", "ı" and "İ" are an "i"; "İ".lower() is two characters): replaced
# first, the lower-cased copy holds a keyword exactly where the patterns see one.
_FOLDS = (("ſ", "s"), ("ı", "i"), ("İ", "i"))
# The pieces of the patterns above, tried at one place each: the rest of a flag's name, a flag's
# value; a query parameter's name, its value.
_RUN = re.compile(r"[\w-]*")
_FLAG_VALUE_AT = re.compile(r"(?:=|\s+)(?!--)(\S+)")
_QUERY_NAME = re.compile(r"[\w.-]*")
_QUERY_VALUE = re.compile(r"[^&#\s\"']+")
_SEPARATORS = ("?", "&", ";")
# Steps taken near keywords before their count is weighed against the patterns' attempts.
_STEPS_BETWEEN_CHECKS = 64
# A step (the keywords' next places, a few `find`s, two anchored matches: 2-4 µs) costs about
# as much as this many attempts (50 ns at a `?` that starts no name, 300 ns at a `--`).
_ATTEMPTS_A_STEP = 50
_Spans = list[tuple[int, int]]
_Step = Callable[[str, "_NextOf", int, int], tuple[tuple[int, int] | None, int]]
# The first window a keyword is looked for in, and the place of a keyword not found.
_FIRST_WINDOW = 4096
_NOWHERE = sys.maxsize


def redact_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` removed (for names, logs, the API, the store)."""
    return _USERINFO.sub("://", text) if "@" in text else text


def redact_query_secrets(text: str) -> str:
    """`text` with the value of every credential-bearing query parameter replaced."""
    if "=" not in text:
        return text
    keywords = _NextOf(_lowered(text), _QUERY_WORDS)
    if keywords.at_or_after(0) < 0:
        return text
    spans, rest = _value_spans(text, keywords, _SEPARATORS, _query_step)
    tail = "" if rest is None else _replace_values(_QUERY_SECRET, text[rest:])
    return _splice(text, spans, len(text) if rest is None else rest, tail)


def redact_command(text: str) -> str:
    """A command line with the values of secret flags replaced."""
    if "--" not in text:
        return text
    keywords = _NextOf(_lowered(text), _FLAG_WORDS)
    if keywords.at_or_after(0) < 0:
        return text
    spans, rest = _value_spans(text, keywords, ("--",), _flag_step)
    tail = "" if rest is None else _redact_flags_by_pattern(text[rest:])
    return _splice(text, spans, len(text) if rest is None else rest, tail)


def _redact_flags_by_pattern(text: str) -> str:
    """`text` with the values of secret flags replaced, one pattern attempt a `--`."""
    inner = _INNER_DASHES.search(text)
    return _replace_values(_SECRET_FLAG_IN_RUNS if inner else _SECRET_FLAG, text)


def _lowered(text: str) -> str:
    """`text` lower-cased, as long as it is, holding a keyword where IGNORECASE sees one."""
    for folded, letter in _FOLDS:
        if folded in text:
            text = text.replace(folded, letter)
    return text.lower()


class _NextOf:
    """The first place at or after a position where one of `words` starts in `text`, asked
    for positions that never go back. Each word is looked for in a window that grows only while
    no word is found in it, and what was searched is remembered: a word absent from the text
    costs no full pass where another one comes first, and no character is searched twice."""

    def __init__(self, text: str, words: tuple[str, ...]) -> None:
        self._text = text
        self._words = words
        self._at = [-1] * len(words)  # each word's next place found, once found
        self._clear = [0] * len(words)  # no place of the word before this but `_at`

    def at_or_after(self, pos: int) -> int:
        """Where the first word at or after `pos` starts, or -1."""
        width = _FIRST_WINDOW
        while True:
            end = pos + width
            first = self._first_before(pos, end)
            if first < end or end >= len(self._text):
                return -1 if first == _NOWHERE else first
            width *= 4

    def more_than(self, limit: int, pos: int) -> bool:
        """Whether the words occur more than `limit` times at or after `pos` (counted one word
        at a time, until they do)."""
        count = 0
        for word in self._words:
            count += self._text.count(word, pos)
            if count > limit:
                return True
        return False

    def _first_before(self, pos: int, end: int) -> int:
        """The first place at or after `pos` of any word, if one starts before `end`; else a
        place at or after `end` (`_NOWHERE` where none is known)."""
        text, at, clear = self._text, self._at, self._clear
        first = _NOWHERE
        for i, word in enumerate(self._words):
            found = at[i]
            if found < pos:
                start = max(pos, clear[i])
                if start >= end:
                    continue
                found = at[i] = text.find(word, start, end + len(word) - 1)
                clear[i] = end if found < 0 else found
                if found < 0:
                    continue
            first = min(first, found)
        return first


class _Budget:
    """Whether steps near keywords still cost less than the patterns' attempts would, checked
    every few steps against the separators passed so far. Where they cost more, the rest of
    the text is weighed once: a step passes at least one keyword, so where the keywords left
    cost no more than the separators left, the steps go on to the end unchecked (a dense patch
    of secrets before a hostile run); else the patterns take the rest over."""

    def __init__(self, text: str, separators: tuple[str, ...], keywords: _NextOf) -> None:
        self._text = text
        self._separators = separators
        self._keywords = keywords
        self._steps = 0
        self._counted_to = 0
        self._attempts = 0
        self._to_the_end = False

    def allows(self, pos: int) -> bool:
        """Count one more step, taken from `pos`; False once the steps cost more."""
        self._steps += 1
        if self._to_the_end or self._steps % _STEPS_BETWEEN_CHECKS:
            return True
        self._attempts += self._separators_in(self._counted_to, pos)
        self._counted_to = pos
        if self._steps * _ATTEMPTS_A_STEP <= self._attempts + _STEPS_BETWEEN_CHECKS:
            return True
        steps_paid = self._separators_in(pos, None) // _ATTEMPTS_A_STEP
        self._to_the_end = not self._keywords.more_than(steps_paid, pos)
        return self._to_the_end

    def _separators_in(self, start: int, end: int | None) -> int:
        """How many separators text[start:end] holds."""
        return sum(self._text.count(sep, start, end) for sep in self._separators)


def _value_spans(
    text: str, keywords: _NextOf, separators: tuple[str, ...], step: _Step
) -> tuple[_Spans, int | None]:
    """Where each secret value lies, `step` taken from each keyword in turn (`separators`: the
    literals the patterns' attempts start at); and the place the patterns go on from where the
    steps came to cost more than those attempts would (None: all of `text` was done)."""
    spans: _Spans = []
    separators_at, budget = _NextOf(text, separators), _Budget(text, separators, keywords)
    pos = 0
    while budget.allows(pos):
        keyword = keywords.at_or_after(pos)
        if keyword < 0:
            return spans, None
        span, pos = step(text, separators_at, pos, keyword)
        if span:
            spans.append(span)
        if pos < 0:
            return spans, None
    return spans, pos


def _flag_step(
    text: str, dashes_at: _NextOf, pos: int, keyword: int
) -> tuple[tuple[int, int] | None, int]:
    """The value of the secret flag holding the keyword at `keyword` (None: it is in no flag or
    has no value), and where the search goes on (-1: nowhere). No match starts in text[:pos].

    A flag holds a keyword after a `--` in the same run of [\\w-]; its value follows the run's
    end, and the run's other keywords share its fate. A keyword with no `--` before it in its
    run sends the search on to the next `--`."""
    dashes = text.rfind("--", pos, keyword)
    run_end = _end_of(_RUN, text, dashes + 2) if dashes >= 0 else -1
    if run_end <= keyword:
        return None, dashes_at.at_or_after(keyword)
    value = _FLAG_VALUE_AT.match(text, run_end)
    return (value.span(1), value.end()) if value else (None, run_end)


def _query_step(
    text: str, separators: _NextOf, pos: int, keyword: int
) -> tuple[tuple[int, int] | None, int]:
    """The value of the query parameter whose name holds the keyword at `keyword`, as
    `_flag_step` does: a name runs from the last `?&;` before its keyword to an "="."""
    separator = max(text.rfind(sep, pos, keyword) for sep in _SEPARATORS)
    name_end = _end_of(_QUERY_NAME, text, separator + 1) if separator >= 0 else -1
    if name_end <= keyword:
        return None, separators.at_or_after(keyword)
    value = _QUERY_VALUE.match(text, name_end + 1) if text.startswith("=", name_end) else None
    return (value.span(), value.end()) if value else (None, name_end)


def _end_of(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where `pattern` (one that may match nothing) matches up to from `pos`."""
    match = pattern.match(text, pos)
    return match.end() if match else pos


def _splice(text: str, spans: _Spans, end: int, tail: str) -> str:
    """`text` up to `end` with each span replaced by `REDACTED`, then `tail`."""
    pieces: list[str] = []
    last = 0
    for start, stop in spans:
        pieces += (text[last:start], REDACTED)
        last = stop
    pieces += (text[last:end], tail)
    return "".join(pieces)


def _replace_values(pattern: re.Pattern[str], text: str) -> str:
    """`text` with each match of `pattern` kept up to its value and the value redacted.

    `pattern`'s first group is the part kept, its last the value; any group between is a
    helper capture, dropped."""
    pieces: list[str | None] = pattern.split(text)
    stride = pattern.groups + 1
    count = len(pieces) // stride
    for helper in range(2, pattern.groups):
        pieces[helper::stride] = [""] * count
    pieces[pattern.groups :: stride] = [REDACTED] * count
    return "".join(pieces)  # type: ignore[arg-type]  # no None is left


def redact_url_secrets(text: str) -> str:
    """`text` with every URL's userinfo and every credential-bearing query value removed."""
    return redact_query_secrets(redact_userinfo(text))


# A credential-bearing `name=value` anywhere in a peer's short message (its error echoing a
# parameter we sent: "invalid parameter token=…"), not only after a URL's `?`, `&` or `;`.
_PEER_PAIR = re.compile(
    r"(?<![\w.-])((?=[\w.-]{0,64}?(?:token|key|secret|password|passwd|sig|credential|auth))"
    r"[\w.-]{1,64}=|[\w.-]{0,48}(?:token|key|secret|password|passwd|credential|authorization)"
    r": ?(?:Bearer |Basic )?)([^&#\s\"',;)]+)",
    re.IGNORECASE,
)
PEER_TEXT_CHARS = 300  # of a peer's message kept (an error answer's text)


def redact_peer_text(text: str) -> str:
    """A peer's message (an error answer's text), cut to `PEER_TEXT_CHARS` and with every
    secret removed: what `redact` removes, and any credential-bearing `name=value` in it."""
    return _PEER_PAIR.sub(rf"\1{REDACTED}", redact(text[:PEER_TEXT_CHARS]))


def redact(text: str) -> str:
    """Every secret this module knows removed from one untrusted string: userinfo, query
    secrets and secret command-line flags."""
    return redact_url_secrets(redact_command(text))
