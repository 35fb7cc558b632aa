"""The error a configuration that cannot be used raises."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration file that cannot be read or holds a bad key; the message names both."""
