"""Secrets kept out of everything the daemon shows: a URL's `user:password@`, query parameters
that carry credentials (`?token=…`, `&X-Amz-Signature=…`) and secret flags of a command line
(`--api-key X`), redacted.

Every string here may be hostile (a prompt logged by `--log-requests`, a gateway's worker URL,
a `/server_info` field), so every pattern runs in time linear in the text: each attempt starts
only where a run of name characters starts (a lookbehind), scans that run once, and runs never
overlap. The old `(\\w+://)[^/\\s]*@` retried at every character of a run: 4.6 s on 40,000.
"""

import re

REDACTED = "<redacted>"
# A URL's `user:password@`: up to the last "@" before the path (a password may hold a raw "@";
# urllib splits there too).
# The literal "://" first lets the engine skip to each one at C speed.
_USERINFO = re.compile(r"://(?<=\w://)[^/\s]*@")
# A query parameter whose name says it carries a credential (presigned URLs, tokens in links):
# the lookahead finds a keyword inside the name's run without leaving it.
_QUERY_WORDS = ("token", "key", "secret", "password", "passwd", "sig", "credential", "auth")
_QUERY_SECRET = re.compile(
    r"([?&;](?=[\w.-]*?(?:token|key|secret|password|passwd|sig|credential|auth))[\w.-]*=)"
    r"[^&#\s\"']+",
    re.IGNORECASE,
)
# A secret flag of a command line (`launch_command` is the raw command): `--api-key X`,
# `--admin-api-key=X`, `--ssl-keyfile-password X`, any *password/secret/token* flag; never a
# value that is itself a flag. The first "--" of a run is found once ((?=(…))\1 is atomic).
_FLAG_WORDS = ("api-key", "api_key", "password", "secret", "credential", "token")
_SECRET_FLAG = re.compile(
    r"(?<![\w-])((?=(?P<lead>[\w-]*?--))(?P=lead)"
    r"(?=[\w-]*?(?:api[-_]key|password|secret|credential|token))[\w-]*(?:=|\s+))(?!--)\S+",
    re.IGNORECASE,
)


def redact_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` removed (for names, logs, the API, the store)."""
    return _USERINFO.sub("://", text) if "@" in text else text


def redact_query_secrets(text: str) -> str:
    """`text` with the value of every credential-bearing query parameter replaced."""
    if "=" not in text or not _mentions(text, _QUERY_WORDS):
        return text
    return _QUERY_SECRET.sub(_keep_name, text)


def redact_command(text: str) -> str:
    """A command line with the values of secret flags replaced."""
    if "--" not in text or not _mentions(text, _FLAG_WORDS):
        return text
    return _SECRET_FLAG.sub(_keep_name, text)


def _mentions(text: str, words: tuple[str, ...]) -> bool:
    """True when `text` holds one of `words` in any case (a C-speed pass that spares the
    patterns' slower scan on the usual text, which names no secret)."""
    lowered = text.lower()
    return any(word in lowered for word in words)


def redact_url_secrets(text: str) -> str:
    """`text` with every URL's userinfo and every credential-bearing query value removed."""
    return redact_query_secrets(redact_userinfo(text))


def redact(text: str) -> str:
    """Every secret this module knows removed from one untrusted string: userinfo, query
    secrets and secret command-line flags."""
    return redact_url_secrets(redact_command(text))


def _keep_name(match: re.Match[str]) -> str:
    """A parameter's or flag's name, its value redacted."""
    return match[1] + REDACTED
