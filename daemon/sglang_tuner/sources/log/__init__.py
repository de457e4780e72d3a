"""SGLang's log as a source: lines read into counts and signals, crashes classified, a file
followed like `tail -F`.

May import: `model`, `config`.
"""
