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
"""

import re

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
# Characters the C-speed keyword check below cannot lower-case to the letter IGNORECASE
# matches them as ("ſ" is an "s", "ı" and "İ" are an "i"): their presence sends the text on.
_FOLDED = ("ſ", "ı", "İ")


def redact_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` removed (for names, logs, the API, the store)."""
    return _USERINFO.sub("://", text) if "@" in text else text


def redact_query_secrets(text: str) -> str:
    """`text` with the value of every credential-bearing query parameter replaced."""
    if "=" not in text or not _mentions(text, _QUERY_WORDS):
        return text
    return _replace_values(_QUERY_SECRET, text)


def redact_command(text: str) -> str:
    """A command line with the values of secret flags replaced."""
    if "--" not in text or not _mentions(text, _FLAG_WORDS):
        return text
    inner = _INNER_DASHES.search(text)
    return _replace_values(_SECRET_FLAG_IN_RUNS if inner else _SECRET_FLAG, text)


def _mentions(text: str, words: tuple[str, ...]) -> bool:
    """True when `text` may hold one of `words` in any case (a C-speed pass that spares the
    patterns' slower scan on the usual text, which names no secret)."""
    lowered = text.lower()
    return any(word in lowered for word in words) or any(char in text for char in _FOLDED)


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


def redact(text: str) -> str:
    """Every secret this module knows removed from one untrusted string: userinfo, query
    secrets and secret command-line flags."""
    return redact_url_secrets(redact_command(text))
