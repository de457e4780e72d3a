"""`sglang-tuner demo`: simulated servers, the daemon, and advice appearing on the terminal."""

from sglang_tuner.__main__ import main

from tests.conftest import free_port


def test_demo_shows_where_to_look_and_advice_as_it_appears(capsys):
    port = free_port()
    assert main(["demo", "--duration", "16", "--port", str(port)]) == 0
    out = capsys.readouterr().out
    assert f"curl 'http://127.0.0.1:{port}/advice?format=text'" in out
    assert f"http://127.0.0.1:{port}/docs" in out
    assert "PENDING  sim-queue_flood" in out and "queue_too_long" in out
    assert "Final advice (the same text as GET /advice?format=text)" in out
    assert "sim-healthy" not in out.split("Final advice")[0]  # healthy gets no advice


def test_demo_refuses_a_busy_port(capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["demo", "--duration", "1", "--port", str(port)]) == 2
    assert "is in use" in capsys.readouterr().err
