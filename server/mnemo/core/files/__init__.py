"""What Mnemo reads and writes in the project's own files: the managed sections and headers `mnemo
publish` writes into agent rule files (agent_rules.py; the skill reader reads them too) and a source
file's symbols and their hashes, by tree-sitter (code_symbols.py)."""
