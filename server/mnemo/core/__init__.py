"""Mnemo's core: memories, recall, skills, lifecycle, sharing, safety, in floors whose imports point down.

    floor 0    data and pure functions: errors, environment (every MNEMO_* variable), text, models, relation/,
               identity, safety/, store_settings, policy
    resources  store/ (every table and SQL statement), embedding/, indexes/
    operations search, cards, skills/, team/, engine (holds the resources and the skill engines), memory/,
               documents/, lifecycle/, edits, sharing/, review, agent/, recovery/

Each package is a room on one floor (tests/unit/test_architecture.py `LAYERS`); at most a dozen modules stay at
the top. docs/architecture.md ("The core in floors") has the map.

Pure Python. It never imports an editor or protocol library (pygls, lsprotocol, mcp), nor the service, the daemon
or a surface; tests/unit/test_core_boundary.py and tests/unit/test_architecture.py enforce this.
"""
