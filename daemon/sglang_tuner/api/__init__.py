"""The HTTP API: /advice, /targets, /changes, /rules, /metrics and the docs, answered from the
latest published evaluation only (`create_app` in `app.py`); response models in `schemas/`.

May import: `model`, `config`, `changes`, `rule`, `rules` (the static catalogue), `evaluation`,
`alerting` (texts), `exporter`, `web`. Never the sources, target state, judge or loop.
"""
