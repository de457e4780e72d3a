"""sglang-tuner: tuning advice for running SGLang servers, from SGLang's own tuning guide."""

__version__ = "0.1.0"
