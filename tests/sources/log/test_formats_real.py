"""Real log formats (tests/fixtures/sglang/logs/formats, provenance in its index.yaml): every
batch and retraction line each source shows is read, at the time the source shows."""

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from sglang_tuner.sources.log.lines import LogScanner
from sglang_tuner.sources.log.log_samples import log_samples

FORMATS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs" / "formats"
ENTRIES = yaml.safe_load((FORMATS / "index.yaml").read_text(encoding="utf-8"))
# SGLang's batch and retraction messages, however the source wraps them
SAID = re.compile(r"Decode batch|Prefill batch|KV cache pool is full")
STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)")


def _lines(entry: dict[str, str]) -> list[str]:
    return (FORMATS / entry["file"]).read_text(encoding="utf-8").splitlines()


def test_the_formats_come_from_thirty_three_sources_with_provenance():
    assert len(ENTRIES) >= 33
    assert len({e["url"] for e in ENTRIES}) == len(ENTRIES)
    for entry in ENTRIES:
        assert (FORMATS / entry["file"]).is_file() and entry["url"].startswith("https://")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_every_batch_line_a_source_shows_is_read(entry):
    lines = _lines(entry)
    shown = sum(len(SAID.findall(line)) for line in lines)
    scanner, read = LogScanner(), 0
    for line in lines:
        scanner.feed([line])
        counts = scanner.take()
        read += counts.decode_lines + counts.prefill_lines + bool(counts.retracted_reqs)
        read += bool(counts.load) and not (counts.decode_lines or counts.prefill_lines)
    assert shown >= 2 and read == shown, f"{entry['file']}: read {read} of {shown}"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_a_source_is_judged_at_the_times_it_shows(entry):
    lines = _lines(entry)
    stamps = [
        datetime.fromisoformat(f"{day} {clock}").replace(tzinfo=timezone.utc).timestamp()
        for line in lines
        for day, clock in STAMP.findall(line)[:1]
    ]
    samples = list(log_samples(lines, 5.0))
    assert samples
    if not stamps:  # a source with no time at all (documentation's example): line order
        return
    # a sample ends its interval: no earlier than the source's first stamp, no later than its
    # last one's interval (SGLang prints local time, read as UTC, as the source shows it)
    assert all(min(stamps) <= s.ts <= max(stamps) + 5.0 for s in samples), entry["file"]
