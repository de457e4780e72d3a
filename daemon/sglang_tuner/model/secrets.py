"""Secrets kept out of everything the daemon shows: a URL's `user:password@` redacted."""

import re

# Up to the last "@" before the path: a password may hold a raw "@" (urllib splits there too).
_USERINFO = re.compile(r"(\w+://)[^/\s]*@")


def redact_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` removed (for names, logs, the API, the store)."""
    return _USERINFO.sub(r"\1", text)
