"""The local embedding model: its ONNX graph built from shipped weights (`onnx_bert.py`), the warm
sessions that embed memories and cues (`embed.py`), and the Ray bridge for large index runs (`ray_embed.py`)."""
