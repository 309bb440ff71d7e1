"""The derived indexes of the store: dense (dense.py, chromadb), keyword (keyword.py, BM25) and the
persisted vector matrix (vector_file.py)."""
