"""Everything that reads an SGLang server: the scrape client and its HTTP, the exposition
parser, the per-version signal map, `/server_info`, DCGM, the log (`log/`), and a fleet through
a Prometheus-compatible query API (`prometheus/`).

May import: `model`, `config`. Keeps no state beyond what rates and merges need.
"""
