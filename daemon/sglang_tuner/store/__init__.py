"""SQLite persistence: windows (a restart does not start blind), alert state, flag histories,
changes and advice history.

May import: `model`, `config`, `changes`, `alerting`, `evaluation`.
"""
