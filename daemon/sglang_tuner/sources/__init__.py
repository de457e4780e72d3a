"""Sources: everything that reads an SGLang server (HTTP, log file, DCGM) and parses it.

They hand `values.Snapshot`, `values_scrape.ScrapeResult` and `values.ServerConfig` to the loop,
which passes them on to the target state.
"""
