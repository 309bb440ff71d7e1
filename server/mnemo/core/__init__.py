"""Mnemo's core: memories, recall, skills, lifecycle, sharing, safety, in floors whose imports point down.

    floor 0    data and pure functions: errors, models, text, config, safety, relation, policy, ...
    resources  store/ (every table and SQL statement), index, keyword, embeddings, team/client; engine.py holds them
    operations search, cards, team/ops, write, recall, memories, docs, recent, lifecycle/, sharing/, review,
               doctor, repair, skills/

Pure Python. It never imports an editor or protocol library (pygls, lsprotocol, mcp), nor the service, the daemon
or a surface; tests/unit/test_core_boundary.py and tests/unit/test_architecture.py enforce this.
"""
