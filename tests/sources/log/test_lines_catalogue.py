"""Every batch line and retraction line SGLang 0.1.3-0.5.23 can print, from its own code (the
message catalogue), read by the line reader: the load signals by construction, not by the
versions whose logs we were shown."""

import re

from sglang_tuner.sources.log.lines import scan_lines
from sglang_tuner.sources.log.messages.catalogue import Message, catalogue
from sglang_tuner.sources.log.messages.classes import SIGNAL

PREFIX = "[2025-06-01 10:00:06 TP0] "
# What SGLang formats in front of "#retracted_reqs" since 0.5.7 (scheduler.py's `msg_prefix`)
RETRACT_PREFIX = "KV cache pool is full. Retract requests. "


def _filled(message: Message) -> str:
    """The message with a count where a field's value goes (after ": ", "=", a bracket or a
    space) and nothing where a fragment goes ("Decode batch{dp}, ..."); the retraction's
    leading fragment is SGLang's own prefix."""
    parts = message.text.split("{*}")
    out = []
    for i, part in enumerate(parts[:-1]):
        out.append(part)
        if i == 0 and not part and parts[1].startswith("#retracted_reqs"):
            out.append(RETRACT_PREFIX)
        else:
            out.append("7" if re.search(r"(?:: |=|\(|\[| )$", part) else "")
    return "".join([*out, parts[-1]])


def _signals(kind: str) -> list[Message]:
    return [m for m in catalogue().messages if (m.verdict.cls, m.verdict.kind) == (SIGNAL, kind)]


def test_every_releases_batch_line_gives_the_schedulers_load() -> None:
    batch_lines = [m for m in _signals("load") if re.search(r"batch|fill batch", m.text, re.I)]
    batch_lines = [m for m in batch_lines if "#running" in m.text or "#queue" in m.text]
    unread = []
    for message in batch_lines:
        counts = scan_lines([PREFIX + _filled(message)])
        load = next(iter(counts.load.values()), None)
        if load is None or (load.running is None and load.queued is None):
            unread.append((message.versions, message.text))
    assert len(batch_lines) >= 45  # Decode, Prefill and 0.1's fill-batch lines of every release
    assert unread == []


def test_every_releases_retraction_line_counts_its_retracted_requests() -> None:
    lines = [m for m in _signals("retraction") if "#retracted_reqs" in m.text]
    uncounted = [
        (m.versions, m.text) for m in lines if scan_lines([PREFIX + _filled(m)]).retracted_reqs != 7
    ]
    assert len(lines) >= 6
    assert uncounted == []
