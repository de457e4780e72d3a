"""Where the API listens: exporter-toolkit's `--web.listen-address` form, `host:port`.

:9877              every interface (IPv6 and IPv4 where the host has both)
127.0.0.1:9877     one IPv4 address
[::1]:9877         one IPv6 address, in brackets as in a URL
localhost:9877     a name, resolved when the daemon binds
"""

ALL_INTERFACES = ""


def parse_listen_address(text: str) -> tuple[str, int]:
    """(host, port) of a listen address; `host` is "" for every interface. ValueError with
    the form to use when it is not one."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"{text!r} is not host:port (e.g. :9877, 127.0.0.1:9877, [::1]:9877)")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"{text!r}: port {port} is not 0-65535")
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise ValueError(f"{text!r}: an IPv6 address goes in brackets, e.g. [::1]:9877")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: put an IPv6 address in brackets, e.g. [{host}]:{port}")
    return host, port


def format_listen_address(host: str, port: int) -> str:
    """The address as `parse_listen_address` reads it (and as the log shows it)."""
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"
