"""HEAD answered as the GET it stands for: the same status and headers, no body."""

from sglang_tuner.api.head import HeadAsGet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient


def _app() -> Starlette:
    async def page(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("x" * 1000, headers={"X-Page": "1"})

    async def echo(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.method)

    app = Starlette(routes=[Route("/page", page), Route("/echo", echo, methods=["POST"])])
    app.add_middleware(HeadAsGet)
    return app


def test_head_has_the_gets_status_and_headers_and_no_body():
    client = TestClient(_app())
    got, head = client.get("/page"), client.head("/page")
    assert head.status_code == got.status_code == 200
    assert head.headers["content-length"] == got.headers["content-length"] == "1000"
    assert head.headers["x-page"] == "1" and head.content == b""
    assert client.head("/nowhere").status_code == 404


def test_other_methods_pass_through_untouched():
    assert TestClient(_app()).post("/echo").text == "POST"
