"""A vault's derived indexes, rebuilt from its records when damaged: BM25 (`lexical.py`), HNSW
(`vector.py`) and the columnar in-memory catalog (`catalog.py`)."""
