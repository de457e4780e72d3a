"""Secrets kept out of everything the daemon shows: a URL's `user:password@`, and query
parameters that carry credentials (`?token=…`, `&X-Amz-Signature=…`), redacted."""

import re

# Up to the last "@" before the path: a password may hold a raw "@" (urllib splits there too).
_USERINFO = re.compile(r"(\w+://)[^/\s]*@")


def redact_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` removed (for names, logs, the API, the store)."""
    return _USERINFO.sub(r"\1", text)


REDACTED = "<redacted>"
# A query parameter whose name says it carries a credential (presigned URLs, tokens in links).
_QUERY_SECRET = re.compile(
    r"([?&;](?:[\w.-]*(?:token|key|secret|password|passwd|sig|signature|credential|auth)"
    r"[\w.-]*)=)([^&#\s\"']+)",
    re.IGNORECASE,
)


def redact_url_secrets(text: str) -> str:
    """`text` with every URL's userinfo and every credential-bearing query value removed."""
    if "@" in text:
        text = redact_userinfo(text)
    if "=" in text:
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    return text
