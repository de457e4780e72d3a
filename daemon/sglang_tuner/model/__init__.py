"""The shared vocabulary every wing speaks: canonical signals, windows, what a scrape ends as,
a server's config, the tuning flags, advice and outcomes, a plan's values.

Pure and at the bottom: imports nothing of the package outside `model`, does no I/O and reads no
clock. Everything else may import it.
"""
