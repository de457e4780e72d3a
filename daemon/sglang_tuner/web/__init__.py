"""The daemon's own HTTP front: TLS, basic auth, extra headers and a rate limit, from a web
config file in Prometheus exporter-toolkit's format.

May import: `model`, `config`.
"""
