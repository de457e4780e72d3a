"""The command line: `run`, `check`, `demo`, `sim`, `rules`, `check-config`, `assets`,
`version`. Wiring only; the only wing that may import the simulator.

May import everything.
"""
