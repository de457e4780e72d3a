"""The API's response models (pydantic only at this edge): advice, changes, watched servers and
the tuning-rule catalogue.

May import: `model`, `changes`, `rule`, `rules`, `evaluation`, and `config.settings`: the rule
catalogue shows each rule with the user's overrides from the settings and the values it runs
with.
"""
