"""The embedding model: the embedder (embedder.py), its files (model_files.py) and the one-time ONNX
export (model_export.py, run in a child process)."""
