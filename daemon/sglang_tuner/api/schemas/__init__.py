"""The API's response models (pydantic only at this edge): advice, changes, watched servers and
the tuning-rule catalogue.

May import: `model`, `changes`, `rules`, `evaluation`.
"""
