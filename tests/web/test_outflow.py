"""The answers' outflow, as an ASGI app sees it: a large body leaves in pieces, a full house
answers 503 with Retry-After (never to the probes), and a reader that takes nothing is dropped."""

import asyncio

import pytest
from sglang_tuner.web import outflow
from sglang_tuner.web.outflow import CHUNK_BYTES, MAX_ANSWERS, Outflow
from starlette.types import Message, Receive, Scope, Send


def _scope(path: str) -> Scope:
    return {"type": "http", "path": path, "method": "GET", "headers": []}


async def _nothing() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _answer(body: bytes, gate: asyncio.Event | None = None):  # noqa: ANN202
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if gate is not None:
            await gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return app


async def test_a_large_body_leaves_in_pieces_that_make_the_whole():
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    body = bytes(range(256)) * (CHUNK_BYTES // 100)  # about 2.6 pieces
    await Outflow(_answer(body))(_scope("/metrics"), _nothing, send)
    pieces = [m for m in sent if m["type"] == "http.response.body"]
    assert len(pieces) == 3 and all(len(p["body"]) <= CHUNK_BYTES for p in pieces)
    assert b"".join(p["body"] for p in pieces) == body
    assert [p["more_body"] for p in pieces] == [True, True, False]


async def test_a_full_house_answers_503_with_retry_after_but_the_probes_get_theirs():
    gate = asyncio.Event()
    flow = Outflow(_answer(b"ok", gate))
    statuses: dict[str, list[int]] = {}

    def sender(path: str) -> Send:
        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                statuses.setdefault(path, []).append(message["status"])
                if message["status"] == 503:
                    assert (b"retry-after", b"1") in message["headers"]

        return send

    held = [asyncio.create_task(flow(_scope("/advice"), _nothing, sender("/advice")))
            for _ in range(MAX_ANSWERS)]  # fmt: skip
    await asyncio.sleep(0)
    await flow(_scope("/metrics"), _nothing, sender("/metrics"))  # one too many
    probe = asyncio.create_task(flow(_scope("/healthz"), _nothing, sender("/healthz")))
    gate.set()
    await asyncio.gather(*held, probe)
    assert statuses["/metrics"] == [503] and flow.refused == 1
    assert statuses["/healthz"] == [200] and statuses["/advice"] == [200] * MAX_ANSWERS
    assert flow.in_progress == 0


async def test_a_reader_that_takes_nothing_is_dropped_and_counted(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(outflow, "SEND_TIMEOUT_SECONDS", 0.05)
    never = asyncio.Event()

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            await never.wait()  # the client's window stays shut

    flow = Outflow(_answer(b"x" * (2 * CHUNK_BYTES)))
    await flow(_scope("/metrics"), _nothing, send)
    assert flow.cut == 1 and flow.in_progress == 0
