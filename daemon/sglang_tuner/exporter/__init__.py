"""The daemon's `/metrics`: a prometheus_client collector of self-metrics and tuning-health
metrics, read from the latest published evaluation (never a scrape at collect time).

May import: `model`, `config`, `changes`, `rule`, `rules`, `alerting`, `evaluation`.
"""
