"""Embedding models beyond the default: where their files are (model_files), assembling a model that
comes in chunks into the model cache (assemble), and the graphs hebbs builds for them (gemma_onnx).
hebbs.store.embed runs them."""
