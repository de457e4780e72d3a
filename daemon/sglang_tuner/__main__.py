"""`python -m sglang_tuner` and the `sglang-tuner` console script: the command line in `cli/`."""

from sglang_tuner.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
