"""The change record of each server: flags before -> after around a restart, and the verdict
(helped / no change / hurt / inconclusive) with its statistics. Pure.

May import: `model`.
"""
