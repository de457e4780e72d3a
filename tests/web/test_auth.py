"""Basic auth, headers and the rate limit in front of the real API, as a client sees them."""

import asyncio
import base64
import time

import bcrypt
import pytest
from fastapi.testclient import TestClient
from sglang_tuner.api.app import create_app
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import TunerState
from sglang_tuner.exporter.collector import TunerCollector
from sglang_tuner.exporter.page import MetricsPage
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.web.auth import PasswordCheck, RateLimiter, WebGuard
from sglang_tuner.web.config import WebConfig

ALICE = bcrypt.hashpw(b"alice-pw", bcrypt.gensalt(4))
BOB = bcrypt.hashpw(b"bob-pw", bcrypt.gensalt(4))


def _client(web: WebConfig, open_paths: tuple[str, ...] = ()) -> tuple[TestClient, WebGuard]:
    state = TunerState()
    page = MetricsPage(TunerCollector(ALL_RULES), state.latest)
    app = create_app(state, page, rules=ALL_RULES, settings=Settings())
    guard = WebGuard(app, web, open_paths)
    return TestClient(guard), guard


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_web_guard_without_credentials_answers_401_with_a_basic_challenge():
    client, _ = _client(WebConfig(users={"alice": ALICE}))
    response = client.get("/rules")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Basic"
    assert response.text == "Unauthorized\n"


def test_web_guard_lets_only_the_right_password_through():
    client, _ = _client(WebConfig(users={"alice": ALICE, "bob": BOB}))
    assert client.get("/rules", auth=("alice", "alice-pw")).status_code == 200
    assert client.get("/rules", auth=("bob", "bob-pw")).status_code == 200
    assert client.get("/rules", auth=("alice", "bob-pw")).status_code == 401
    assert client.get("/rules", auth=("carol", "alice-pw")).status_code == 401
    assert client.get("/rules", auth=("alice", "")).status_code == 401


@pytest.mark.parametrize(
    "header",
    ["Bearer alice-pw", "Basic !!!not-base64", "Basic " + base64.b64encode(b"alice").decode()],
)
def test_web_guard_refuses_malformed_credentials(header):
    client, _ = _client(WebConfig(users={"alice": ALICE}))
    assert client.get("/rules", headers={"Authorization": header}).status_code == 401


def test_web_guard_basic_scheme_is_case_insensitive():
    client, _ = _client(WebConfig(users={"alice": ALICE}))
    token = _basic("alice", "alice-pw")["Authorization"].split()[1]
    assert client.get("/rules", headers={"Authorization": f"basic {token}"}).status_code == 200


def test_web_guard_open_paths_answer_without_credentials_and_only_them():
    client, _ = _client(WebConfig(users={"alice": ALICE}), open_paths=("/healthz",))
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 401
    assert client.get("/healthz/").status_code == 401
    assert client.get("/metrics").status_code == 401


def test_web_guard_auth_excluded_paths_of_the_web_config_join_the_open_paths():
    web = WebConfig(users={"alice": ALICE}, auth_excluded_paths=frozenset({"/metrics"}))
    client, _ = _client(web, open_paths=("/healthz",))
    assert client.get("/metrics").status_code == 200
    assert client.get("/healthz").status_code == 200
    assert client.get("/advice").status_code == 401


def test_web_guard_adds_the_configured_headers_to_every_answer():
    headers = {"X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=600"}
    client, _ = _client(WebConfig(users={"alice": ALICE}, headers=headers))
    for response in (client.get("/rules"), client.get("/rules", auth=("alice", "alice-pw"))):
        assert response.headers["X-Frame-Options"] == "deny"
        assert response.headers["Strict-Transport-Security"] == "max-age=600"


def test_web_guard_rate_limit_answers_429_after_the_burst():
    client, _ = _client(WebConfig(rate_limit=(60.0, 3)))
    assert [client.get("/healthz").status_code for _ in range(4)] == [200, 200, 200, 429]


def test_web_guard_without_users_is_open():
    client, _ = _client(WebConfig())
    assert client.get("/rules").status_code == 200


def test_web_guard_update_switches_users_at_once():
    client, guard = _client(WebConfig(users={"alice": ALICE}))
    assert client.get("/rules", auth=("alice", "alice-pw")).status_code == 200
    guard.update(WebConfig(users={"bob": BOB}), ())
    assert client.get("/rules", auth=("alice", "alice-pw")).status_code == 401
    assert client.get("/rules", auth=("bob", "bob-pw")).status_code == 200


def test_password_check_pays_bcrypt_once_per_good_password():
    slow = bcrypt.hashpw(b"pw", bcrypt.gensalt(12))  # ~0.3 s a check
    check = PasswordCheck({"prometheus": slow})

    async def timed(password: bytes, user: str = "prometheus") -> tuple[bool, float]:
        start = time.perf_counter()
        ok = await check.is_valid(user, password)
        return ok, time.perf_counter() - start

    async def scrapes() -> list[tuple[bool, float]]:
        return [await timed(b"pw") for _ in range(6)]

    (first_ok, first), *later = asyncio.run(scrapes())
    assert first_ok and all(ok for ok, _ in later)
    assert sum(seconds for _, seconds in later) < first
    wrong = asyncio.run(timed(b"wrong"))
    assert wrong[0] is False and wrong[1] > first / 4  # a wrong password is not remembered
    unknown = asyncio.run(timed(b"pw", user="nobody"))
    assert unknown[0] is False and unknown[1] > first / 4  # no faster for a user that is not


def test_password_check_refuses_passwords_longer_than_bcrypt_reads():
    long = b"x" * 72
    check = PasswordCheck({"alice": bcrypt.hashpw(long, bcrypt.gensalt(4))})
    assert asyncio.run(check.is_valid("alice", long))
    assert not asyncio.run(check.is_valid("alice", long + b"y"))


def test_rate_limiter_refills_one_request_per_interval():
    limiter = RateLimiter(interval_seconds=2.0, burst=2)
    assert [limiter.allow(0.0), limiter.allow(0.1), limiter.allow(0.2)] == [True, True, False]
    assert limiter.allow(1.2) is False  # half a token back
    assert limiter.allow(2.3) is True
    assert [limiter.allow(100.0), limiter.allow(100.0), limiter.allow(100.0)] == [
        True,
        True,
        False,
    ]
