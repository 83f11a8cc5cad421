"""Exceptions of the safety package."""

from __future__ import annotations

__all__ = ["SafetyError", "SafetyConfigError"]


class SafetyError(Exception):
    """Base class of every error raised by ``so101_safety``."""


class SafetyConfigError(SafetyError, ValueError):
    """A safety parameter is missing, of the wrong type or outside its valid range."""
