"""What an agent session receives and leaves: the context block (context_block.py), the corrections it
learns from (corrections.py), what a session already got (sessions.py), the hand-off note (handoff.py)
and the recent context (recent.py)."""
