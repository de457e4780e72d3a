"""Secrets kept out of what the daemon shows: a URL's `user:password@` removed."""

import pytest
from sglang_tuner.model.secrets import redact_userinfo


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
