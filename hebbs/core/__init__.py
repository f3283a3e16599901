"""One open vault: the object that owns a vault's record store, indexes and embedder and gives
strategies and workflows their public API (`open_vault.py`), what is embedded for a memory
(`memory_text.py`), and `hebbs doctor` (`doctor.py`)."""
