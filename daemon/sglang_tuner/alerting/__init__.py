"""Alerts: the lifecycle of Prometheus (inactive -> pending -> firing -> resolved) over the
advice, what an alert says, and the Alertmanager v2 client that pushes them.

May import: `model`, `config`. The lifecycle and texts are pure; only `alertmanager.py` does I/O
(the loop calls it with the published evaluation's alerts).
"""
