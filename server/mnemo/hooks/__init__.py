"""Agent hooks: what an agent receives without asking, at the moment it matters.

`entry` is the command an agent runs on each event (`mnemo hook session-start|prompt|pre-tool|session-end`): it
reads the event's JSON on stdin, asks the owner for the context block (the `context` service method) within a
deadline, and prints the agent's output format; it imports only the standard library and the small `wire` client,
so its start-up stays short, and it fails open (nothing injected, one line on stderr, exit 0). `claude` installs
the entries into Claude Code's settings files without touching anything else (`jsonspan` keeps every other byte),
`transcript` summarizes a Claude Code transcript for the session's hand-off, without a model.
"""
