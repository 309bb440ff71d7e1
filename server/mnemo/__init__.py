"""Mnemo: a memory and skills layer for AI coding agents."""

__version__ = "0.1.0"
# Bumped whenever the daemon wire protocol changes incompatibly.
PROTOCOL_VERSION = 1
