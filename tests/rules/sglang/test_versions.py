"""Version parsing and the version-ordered table lookups every facts table uses."""

import pytest
from sglang_tuner.rules.sglang.versions import (
    NEWEST_KNOWN,
    as_of,
    effective_version,
    in_span,
    parse_version,
    release,
    version_at_least,
    version_note,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.5.14", (0, 5, 14, 0)),
        ("0.5.14.post2", (0, 5, 14, 2)),
        ("v0.5.0rc0", (0, 5, 0, 0)),  # a pre-release counts as its release
        ("0.5.10.dev0+g1234", (0, 5, 10, 0)),
        ("0.5", (0, 5, 0, 0)),
        (" 0.4.9.post3 ", (0, 4, 9, 3)),
        ("main", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_version_reads_post_releases_and_rejects_names(text, expected):
    assert parse_version(text) == expected


def test_release_refuses_a_typo_in_a_table():
    with pytest.raises(ValueError, match="not an SGLang version"):
        release("0.five")


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.4.9.post2", False), ("0.4.9.post3", True), ("0.4.10", True), (None, None)],
)
def test_version_at_least_orders_post_releases(version, expected):
    assert version_at_least(version, (0, 4, 9, 3)) is expected


def test_unknown_or_newer_version_gets_newest_behaviour_and_says_so():
    assert effective_version(None) == release(NEWEST_KNOWN)
    assert effective_version("0.5.9") == (0, 5, 9, 0)
    assert "unknown" in version_note(None)
    assert "newer than" in version_note("0.9.0")
    assert version_note("0.5.9") == ""


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.5.13.post1", False), ("0.5.14", True), ("0.5.19", True), ("0.5.20", False)],
)
def test_in_span_is_half_open(version, expected):
    assert in_span(version, "0.5.14", "0.5.20") is expected


def test_as_of_picks_the_last_entry_at_or_before_the_version():
    history = (("0.0.0", "lpm"), ("0.4.3.post3", "fcfs"))
    assert as_of("0.4.3.post2", history) == "lpm"
    assert as_of("0.4.3.post3", history) == "fcfs"
    assert as_of(None, history) == "fcfs"
