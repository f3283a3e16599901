"""The local embedding models: where a model's files are (`model_files.py`), assembling a model that comes
in chunks into the model cache (`assemble.py`), the ONNX graphs hebbs builds from shipped weights
(`onnx_bert.py`, `gemma_onnx.py`), the warm sessions that embed memories and cues (`embed.py`), and the
Ray bridge for large index runs (`ray_embed.py`)."""
