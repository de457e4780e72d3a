"""Client-side HTTP credentials and TLS for the services we call (Alertmanager, Prometheus).

Secrets are read from their files once, when asked, and never logged; URLs are shown without
their `user:password@` part.
"""

import base64
import os
import ssl
from pathlib import Path

from sglang_tuner.config.key_files import read_key_file
from sglang_tuner.config.settings import BasicAuthSettings, TLSSettings


def auth_headers(
    basic_auth: BasicAuthSettings | None, bearer_token_file: Path | None, what: str
) -> dict[str, str]:
    """`Authorization` for basic auth or a bearer token, secrets read from their files now."""
    if basic_auth is not None and bearer_token_file is not None:
        raise ValueError(f"{what}: basic_auth and bearer_token_file are exclusive")
    if basic_auth is not None:
        password = read_key_file(basic_auth.password_file)
        pair = f"{basic_auth.username}:{password}".encode()
        return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
    if bearer_token_file is not None:
        return {"Authorization": f"Bearer {read_key_file(bearer_token_file)}"}
    return {}


def api_key(api_key_file: Path | None, api_key_env: str | None) -> str | None:
    """An SGLang server's `--api-key` from its file, else from the environment variable named
    (unset or empty: none); raises ValueError when the file cannot be read."""
    if api_key_file is not None:
        return read_key_file(api_key_file)
    if api_key_env:
        return os.environ.get(api_key_env) or None
    return None


def ssl_context(tls: TLSSettings) -> ssl.SSLContext:
    """Verification from `ca_file` (or the system store), client cert, optional skip-verify."""
    context = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
    if tls.cert_file is not None:
        key = str(tls.key_file) if tls.key_file else None
        context.load_cert_chain(str(tls.cert_file), key)
    if tls.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
