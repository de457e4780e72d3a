"""The shared vocabulary every wing speaks: canonical signals, windows, what a scrape ends as,
a server's config, the tuning flags, advice and outcomes, a plan's values, a crash said in
words (`crash_report.py`), the KV pool's startup budget (`pool_budget.py`).

May import: nothing outside `model`. Pure and at the bottom: no I/O, no clock; everything else
may import it.
"""
