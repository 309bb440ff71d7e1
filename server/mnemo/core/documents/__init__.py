"""Project Markdown docs as recall sources: the heading-delimited blocks (blocks.py) and their index
(indexing.py)."""
