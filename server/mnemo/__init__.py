"""Mnemo: a memory and skills layer for AI coding agents."""

from mnemo import native as _native

__version__ = "0.1.0"
# Bumped whenever the daemon wire protocol changes incompatibly.
PROTOCOL_VERSION = 1

# A compiled module (mnemo/native.py) is loaded only for the source beside it: decided before any is imported.
_native.install()
