"""Mnemo language server: a thin pygls client of the owner process (see docs/architecture.md)."""
