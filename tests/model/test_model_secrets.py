"""Secrets kept out of what the daemon shows: a URL's `user:password@`, query secrets and
secret flags removed, from any string, however hostile."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_tuner.model import secrets
from sglang_tuner.model.secrets import REDACTED, redact, redact_userinfo


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://ops:hunter2@gpu-1:30000", "http://gpu-1:30000"),
        ("https://ops@am.example/api/v2/alerts", "https://am.example/api/v2/alerts"),
        ("http://:hunter2@gpu-1:30000/metrics", "http://gpu-1:30000/metrics"),
        ("http://gpu-1:30000", "http://gpu-1:30000"),
    ],
)
def test_redact_userinfo_removes_the_credentials_of_a_url(text, shown):
    assert redact_userinfo(text) == shown


def test_redact_userinfo_removes_them_from_every_url_in_a_message():
    text = "GET http://a:pw1@gpu-1:1/x failed; tried https://b:pw2@gpu-2:2 too"
    assert redact_userinfo(text) == "GET http://gpu-1:1/x failed; tried https://gpu-2:2 too"


def test_redact_userinfo_leaves_an_at_sign_outside_the_authority_alone():
    assert redact_userinfo("http://gpu-1:1/users/@me?q=a@b") == "http://gpu-1:1/users/@me?q=a@b"
    assert redact_userinfo("mail ops@example.com") == "mail ops@example.com"


def test_redact_userinfo_removes_a_password_holding_an_at_sign():
    assert redact_userinfo("http://ops:p@ss@gpu-1:30000") == "http://gpu-1:30000"


# Adversarial strings: built from the characters every pattern reacts to, so runs of them,
# separators and half-finished URLs or flags appear often.
_ALPHABET = "a_:/@?&;=-. \t#'\"é" + "tokenTOKENkeysigpassword"
_PIECES = st.sampled_from(
    ["://", "http://", "@", "?", "&", "=", "--", "-", " ", "/", "token", "api-key", "key",
     "password", "sig", "a", "é", ":", "\n"]
)  # fmt: skip
adversarial = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=80),
    st.lists(_PIECES, max_size=40).map("".join),
)
SECRET = "S3CR3TVALUE"


@given(adversarial, adversarial)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_a_password_in_a_url_never_survives_whatever_surrounds_it(before, after):
    text = f"{before} http://ops:{SECRET}@gpu-1:30000/metrics {after}"
    assert SECRET not in redact(text)


@given(adversarial, adversarial, st.sampled_from(["token", "X-Amz-Signature", "api_key"]))
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_a_query_secret_never_survives_whatever_surrounds_it(before, after, name):
    text = f"{before} http://gpu-1/x?a=1&{name}={SECRET}&b=2 {after}"
    assert SECRET not in redact(text)


@given(adversarial, adversarial, st.sampled_from(["--api-key ", "--admin-api-key=", "--token  "]))
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_a_secret_flag_value_never_survives_whatever_surrounds_it(before, after, flag):
    text = f"{before} python -m sglang.launch_server {flag}{SECRET} --port 1 {after}"
    assert SECRET not in redact(text)


@given(adversarial)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_text_without_secrets_is_left_exactly_as_it_was(text):
    # no "@" after a scheme, no keyword: nothing to redact, nothing changed
    clean = text.replace("@", "").lower()
    for word in ("token", "key", "sig", "password", "auth", "secret", "credential", "passwd"):
        clean = clean.replace(word, "")
    assert redact(clean) == clean


# Characters IGNORECASE matches as an ASCII letter of a keyword ("ſ" as "s", "ı" and "İ" as
# "i", the Kelvin sign as "k"), and the runs of dashes a flag may hide in.
_FOLDED = st.sampled_from(
    ["ſ", "ı", "İ", "\u212a", "pasſword", "apı-key", "to\u212aen", "--", "---"]
)
with_folds = st.one_of(
    adversarial,
    st.lists(st.one_of(_PIECES, _FOLDED), max_size=40).map("".join),
)


@given(with_folds)
@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
def test_redaction_matches_the_plain_patterns_it_replaced(text):
    # The backtracking patterns this module used to run (quadratic, fine on short strings):
    # the linear ones give the same answer on every string.
    assert redact(text) == _reference_redact(text)


def _reference_redact(text: str) -> str:
    flag = re.compile(
        r"(--[\w-]*(?:api[-_]key|password|secret|credential|token)[\w-]*)(=|\s+)(?!--)(\S+)",
        re.IGNORECASE,
    )
    text = flag.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = re.sub(r"(\w+://)[^/\s]*@", r"\1", text)
    query = re.compile(
        r"([?&;](?:[\w.-]*(?:token|key|secret|password|passwd|sig|signature|credential|auth)"
        r"[\w.-]*)=)([^&#\s\"']+)",
        re.IGNORECASE,
    )
    return query.sub(lambda m: m.group(1) + REDACTED, text)


@pytest.mark.parametrize(
    "text",
    ["a" * 200_000, "a://" * 50_000, "http://" + "a:" * 100_000, "?token" * 40_000,
     "-" * 200_000, "--token " * 25_000, "@" * 200_000, "a--" * 70_000, "--token" * 30_000,
     "--" + "a" * 200_000, "?" + "a" * 200_000, "a--token-" * 25_000, "--ta" * 50_000],
)  # fmt: skip
def test_long_hostile_strings_are_redacted_like_short_ones(text):
    # 200 KB of each shape the old patterns took minutes on (or a pattern that rescans a run
    # from each "--" in it would): nothing in them is a secret, and a password, a query token
    # and a secret flag after them are still found
    assert redact(text) == text
    tail = f" http://u:{SECRET}@h/?token={SECRET} --api-key {SECRET}"
    assert SECRET not in redact(text + tail)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # a flag joined to a word keeps its name whole, whichever "--" of the run starts it
        ("a--b--api-key s1 --port 1", f"a--b--api-key {REDACTED} --port 1"),
        ("--token--x s1", f"--token--x {REDACTED}"),
        ("--tokenx--y--z=s1", f"--tokenx--y--z={REDACTED}"),
        ("--token--password s1", f"--token--password {REDACTED}"),
        ("---api-key s1", f"---api-key {REDACTED}"),
        # a name too long for the usual flag, and one whose run never reaches a value
        ("--" + "a" * 100 + "-token s1", "--" + "a" * 100 + f"-token {REDACTED}"),
        ("--token--token--token", "--token--token--token"),
        # a value that is itself a flag is no value
        ("--api-key --port 1", "--api-key --port 1"),
        # letters IGNORECASE takes for ASCII ones: a long s, a dotless i
        (
            "--paſſword s1 http://h/?apı_key=s2",
            f"--paſſword {REDACTED} http://h/?apı_key={REDACTED}",
        ),
    ],
)
def test_secret_flags_in_any_run_are_redacted_and_the_rest_left_alone(text, shown):
    assert redact(text) == shown


def test_a_hundred_thousand_secrets_are_each_redacted():
    # every value replaced, whatever the count: one slice, not one call per match
    flags = "--token s1 " * 100_000
    urls = "http://u:p@h/?token=s2&" * 50_000
    assert redact(flags) == f"--token {REDACTED} " * 100_000
    assert redact(urls) == f"http://h/?token={REDACTED}&" * 50_000


@given(with_folds)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_the_steps_from_keywords_and_the_patterns_they_hand_over_to_agree(text):
    # keywords looked for in one-character windows, the steps weighed after every one to three
    # of them, so the patterns take over (or the steps go on to the end) at every point: each
    # gives the answer of the plain patterns
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(secrets, "_FIRST_WINDOW", 1)
        for steps, cost in [(1, 1), (2, 1), (3, 1), (1, 50), (2, 50)]:
            patch.setattr(secrets, "_STEPS_BETWEEN_CHECKS", steps)
            patch.setattr(secrets, "_ATTEMPTS_A_STEP", cost)
            assert redact(text) == _reference_redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # keyword-dense: a step a secret, until the patterns take the rest over
        "-- token x --token=y ?token=z&sig=w " * 300,
        "--token--token" * 300 + " x " + "?key&token;sig=v" * 300,
        # a dense patch of secrets, then separators with no keyword: the steps go on to the end
        "--token x " * 100 + "--ta" * 2_000 + "?a=" * 2_000 + "--password=s1 ?token=s2",
        # keyword-free but for the end, past the first window the keywords are looked for in
        "- -- ? & ; = " * 2_000 + "--api-key s1 ?a=1&X-Amz-Signature=s2",
        # keywords with no "--" or separator before them in their run or name
        "token api_key=s1 password " * 500 + "--x-password s2 &passwd=s3",
    ],
)
def test_long_keyword_dense_and_keyword_free_text_is_redacted_like_the_plain_patterns(text):
    assert redact(text) == _reference_redact(text)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("bad_data: invalid parameter token=abc123 in query", "token=<redacted> in query"),
        ("error: api_key: sk-123, retry", "api_key: <redacted>, retry"),
        ("unauthorized: http://ops:pw@prom:9090/?access_token=x", "unauthorized: http://prom:9090"),
        ("bad header Authorization: Bearer abc123", "Authorization: Bearer <redacted>"),
    ],
)
def test_a_peers_message_keeps_no_credential_it_echoes(text, shown):
    from sglang_tuner.model.secrets import redact_peer_text

    out = redact_peer_text(text)
    assert shown in out and not any(v in out for v in ("abc123", "sk-123", "pw@", "=x"))


def test_a_peers_message_is_cut_and_its_plain_words_kept():
    from sglang_tuner.model.secrets import PEER_TEXT_CHARS, redact_peer_text

    assert redact_peer_text('parse error: unexpected "sum"') == 'parse error: unexpected "sum"'
    assert len(redact_peer_text("x" * 10_000)) == PEER_TEXT_CHARS
