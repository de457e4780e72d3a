"""SGLang's log as a source: lines read into counts and signals, crashes classified, a file
followed like `tail -F`.

May import: `model`, `config`, and `sources.server_info`: the log's `server_args=...` line and
start-up summary resolve into the server's config by the one reader `/server_info` uses (the
same fields, the same per-version names, the same redaction).
"""
