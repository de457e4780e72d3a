"""The API's TLS: a web config's `tls_server_config` (exporter-toolkit's keys) as a server
`SSLContext`, kept current while the daemon runs (`ServerTLS`)."""

import logging
import os
import ssl
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr

logger = logging.getLogger(__name__)

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_VERIFY_MODES = {
    "": ssl.CERT_NONE,
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Python's ssl module verifies every client certificate it asks for: it cannot accept one
# without verifying it, which is what these exporter-toolkit policies mean.
_UNVERIFIED = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
# exporter-toolkit's (Go's) names -> OpenSSL's; None: a TLS 1.3 suite, not configurable there.
_CIPHERS: dict[str, str | None] = {
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
}
_CURVES = {"CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1"}
_CURVES["X25519"] = "X25519"
_REASONS = {"KEY_VALUES_MISMATCH": "the key does not match the certificate"}
_WHERE = "tls_server_config"


class TLSConfigError(ValueError):
    """TLS settings or files that cannot be served with."""


class TLSServerConfig(BaseModel):
    """`tls_server_config`, exporter-toolkit's keys (an empty string is unset, as there)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cert: str = ""
    key: SecretStr = SecretStr("")
    client_ca: str = ""
    cert_file: str = ""
    key_file: str = ""
    client_auth_type: str = ""
    client_ca_file: str = ""
    cipher_suites: list[str] = Field(default_factory=list)
    curve_preferences: list[str] = Field(default_factory=list)
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    prefer_server_cipher_suites: bool = True
    client_allowed_sans: list[str] | None = None

    @property
    def is_enabled(self) -> bool:
        """Any key that turns TLS on is set (exporter-toolkit's rule)."""
        keys = (self.cert, self.key.get_secret_value(), self.client_ca, self.cert_file)
        return any((*keys, self.key_file, self.client_ca_file, self.client_auth_type))

    def files(self) -> tuple[str, ...]:
        """The files TLS reads."""
        return tuple(f for f in (self.cert_file, self.key_file, self.client_ca_file) if f)


def server_context(tls: TLSServerConfig) -> ssl.SSLContext:
    """A server SSLContext for `tls`, its files read now; TLSConfigError if they are bad."""
    check_policy(tls)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocol(context, tls)
    if len(tls.curve_preferences) == 1:  # Python's ssl can set one curve, not a list
        try:
            context.set_ecdh_curve(_CURVES[tls.curve_preferences[0]])
        except ssl.SSLError:  # X25519 on Python 3.10, whose ssl sets only EC curves
            logger.warning("%s.curve_preferences: OpenSSL's defaults are used", _WHERE)
    elif tls.curve_preferences:
        logger.warning("%s.curve_preferences: several curves: OpenSSL's defaults are used", _WHERE)
    context.set_alpn_protocols(["http/1.1"])
    _load_chain(context, tls)
    _load_client_cas(context, tls)
    return context


def check_policy(tls: TLSServerConfig) -> None:
    """TLSConfigError unless the settings (not the files) make a policy we can serve."""
    if not (tls.cert or tls.cert_file) or not (tls.key.get_secret_value() or tls.key_file):
        raise TLSConfigError(f"{_WHERE}: needs cert_file (or cert) and key_file (or key)")
    for name in ("min_version", "max_version"):
        if getattr(tls, name) not in TLS_VERSIONS:
            raise TLSConfigError(f"{_WHERE}.{name}: unknown TLS version {getattr(tls, name)!r}")
    if TLS_VERSIONS[tls.min_version] > TLS_VERSIONS[tls.max_version]:
        raise TLSConfigError(f"{_WHERE}: min_version is above max_version")
    if tls.client_auth_type in _UNVERIFIED:
        raise TLSConfigError(
            f"{_WHERE}.client_auth_type: {tls.client_auth_type} is not supported (client "
            "certificates are always verified here): use VerifyClientCertIfGiven or "
            "RequireAndVerifyClientCert with client_ca_file"
        )
    if tls.client_auth_type not in _VERIFY_MODES:
        raise TLSConfigError(f"{_WHERE}.client_auth_type: unknown {tls.client_auth_type!r}")
    has_ca = bool(tls.client_ca or tls.client_ca_file)
    verifies = _VERIFY_MODES[tls.client_auth_type] != ssl.CERT_NONE
    if has_ca and not verifies:
        raise TLSConfigError(f"{_WHERE}: client CAs are given but client_auth_type verifies none")
    if verifies and not has_ca:
        raise TLSConfigError(f"{_WHERE}: {tls.client_auth_type} needs client_ca_file")
    if tls.client_allowed_sans is not None:
        raise TLSConfigError(f"{_WHERE}.client_allowed_sans: not supported")
    for key, known in (("cipher_suites", _CIPHERS), ("curve_preferences", _CURVES)):
        unknown = [name for name in getattr(tls, key) if name not in known]
        if unknown:
            raise TLSConfigError(f"{_WHERE}.{key}: unknown {', '.join(map(repr, unknown))}")


def _set_protocol(context: ssl.SSLContext, tls: TLSServerConfig) -> None:
    """Versions, client verification and ciphers: what a connection takes from the context it
    starts with (so a reload copies them onto the listening one)."""
    context.minimum_version = TLS_VERSIONS[tls.min_version]
    context.maximum_version = TLS_VERSIONS[tls.max_version]
    context.verify_mode = _VERIFY_MODES[tls.client_auth_type]
    if tls.prefer_server_cipher_suites:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    ciphers = [c for c in map(_CIPHERS.__getitem__, tls.cipher_suites) if c]
    if not ciphers:  # back to the defaults, as a reload may drop cipher_suites
        default = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).get_ciphers()
        ciphers = [c["name"] for c in default if c["protocol"] != "TLSv1.3"]
    context.set_ciphers(":".join(ciphers))


def _load_chain(context: ssl.SSLContext, tls: TLSServerConfig) -> None:
    """The file wins over inline PEM text when both are given (as in exporter-toolkit)."""
    if tls.cert_file and tls.key_file:
        _load_chain_files(context, Path(tls.cert_file), Path(tls.key_file))
        return
    cert = _read("cert_file", tls.cert_file) if tls.cert_file else tls.cert.encode()
    key = _read("key_file", tls.key_file) if tls.key_file else None
    with tempfile.TemporaryDirectory() as folder:  # ssl loads keys from files only (mode 0700)
        cert_path, key_path = Path(folder, "cert.pem"), Path(folder, "key.pem")
        cert_path.write_bytes(cert)
        key_path.write_bytes(key or tls.key.get_secret_value().encode())
        _load_chain_files(context, cert_path, key_path)


def _read(name: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TLSConfigError(f"{_WHERE}.{name}: cannot read {path}: {exc.strerror}") from None


def _load_chain_files(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    for name, path in (("cert_file", cert), ("key_file", key)):
        _read(name, str(path))
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except ssl.SSLError as exc:
        reason = _REASONS.get(exc.reason or "", exc.reason or "not a PEM certificate and key")
        raise TLSConfigError(f"{_WHERE}: cannot load the certificate: {reason}") from None


def _no_password() -> str:
    """Never prompt on a terminal for an encrypted key (exporter-toolkit cannot read one)."""
    raise TLSConfigError(f"{_WHERE}: the key is encrypted (give an unencrypted key)")


def _load_client_cas(context: ssl.SSLContext, tls: TLSServerConfig) -> None:
    if tls.client_ca_file:
        pem = _read("client_ca_file", tls.client_ca_file).decode(errors="replace")
    else:
        pem = tls.client_ca
    if pem:
        try:
            context.load_verify_locations(cadata=pem)
        except ssl.SSLError as exc:
            reason = exc.reason or "not a PEM certificate"
            raise TLSConfigError(f"{_WHERE}: cannot load the client CA: {reason}") from None


def _stamp(tls: TLSServerConfig) -> tuple[tuple[int, ...], ...]:
    """What tells a changed file: inode, size and modification time (nothing if missing)."""
    out: list[tuple[int, ...]] = []
    for path in tls.files():
        try:
            st = os.stat(path)
        except OSError:
            out.append(())
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class ServerTLS:
    """The API socket's TLS, kept current without a restart.

    Every new connection is switched (in the TLS hello) to the newest context: rebuilt when the
    certificate, key or client CA files changed on disk, as exporter-toolkit re-reads them for
    each connection, or installed by a reload. A connection takes versions, client verification
    and ciphers from the listening context before that switch, so `install` copies them there.
    """

    def __init__(self, tls: TLSServerConfig, context: ssl.SSLContext) -> None:
        self.listening = context
        self._tls, self._current, self._stamp = tls, context, _stamp(tls)
        context.sni_callback = self._on_hello

    def install(self, tls: TLSServerConfig, context: ssl.SSLContext) -> None:
        """Serve new connections with `context`; call it on the API's event loop."""
        _set_protocol(self.listening, tls)
        self._tls, self._current, self._stamp = tls, context, _stamp(tls)

    def _on_hello(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        del server_name  # called with or without SNI
        stamp = _stamp(self._tls)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._current = server_context(self._tls)
                logger.info("TLS files changed: new connections use them")
            except (TLSConfigError, ssl.SSLError, OSError) as exc:
                logger.error("TLS files changed but cannot be used, keeping the old: %s", exc)
        if self._current is not self.listening:
            connection.context = self._current
