"""Pure analysis: detection rules, scoring, smoothing, hysteresis and scheduling policy.

Nothing in this package does I/O or imports an adapter (enforced by the
import-linter contracts in pyproject.toml).
"""
