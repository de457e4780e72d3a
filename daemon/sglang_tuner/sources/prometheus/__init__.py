"""A fleet read through a Prometheus-compatible query API (Prometheus, Thanos, Mimir,
VictoriaMetrics): the signal map as PromQL, the client, the discovered targets, one round.

May import: `model`, `config`, the rest of `sources`.
"""
