"""Mnemo's core: memories, recall, skills, lifecycle, sharing, safety.

Pure Python. It never imports an editor or protocol library (pygls, lsprotocol, mcp); a test enforces this.
"""
