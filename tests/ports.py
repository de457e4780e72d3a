"""Free TCP ports on 127.0.0.1 for tests that start servers."""

import socket


def free_port(count: int = 1) -> int:
    """The first of `count` consecutive ports nothing listens on right now."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            first = int(sock.getsockname()[1])
        if first + count <= 65536 and all(_is_free(first + i) for i in range(1, count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
