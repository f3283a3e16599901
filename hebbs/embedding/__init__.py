"""Embedding models beyond the default: where their files come from (model_files) and the graphs hebbs
builds for them (gemma_onnx). hebbs.store.embed runs them."""
