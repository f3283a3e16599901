"""Compute EmbeddingGemma-300m reference vectors with torch and transformers, once, for the test fixture
tests/embedding/data/embeddinggemma_reference.json (tests/embedding/test_gemma.py compares hebbs' own
ONNX graph with it).

torch and transformers are not hebbs dependencies: they come with the ``reference`` extra
(`pip install -e '.[reference]'`), used by this script only. The encoder is transformers'
Gemma3TextModel (eager attention, float32) loaded from the assembled folder; pooling, the two Dense
layers and the normalization follow the folder's modules.json as sentence-transformers runs them. The
texts are tokenized with the folder's tokenizer.json (<bos> ... <eos>, as the model was trained).

    python scripts/embeddinggemma_reference.py [MODEL_DIR]   # default: the model cache's copy
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import AutoModel

from hebbs.embedding.model_files import default_cache_dir

QUERY, DOCUMENT = "task: search result | query: ", "title: none | text: "
TEXTS = [
    ("query", "Which planet is known as the Red Planet?"),
    ("document", "Mars, known for its reddish appearance, is often referred to as the Red Planet."),
    ("document", "Venus is often called Earth's twin because of its similar size and proximity."),
    ("document", "The committee met on Tuesday to review the budget for the new library wing, and after a long "
                 "discussion about shelving, lighting and the cost of the reading room's windows it approved the "
                 "plan with two changes: the children's section moves to the ground floor, and the opening is "
                 "postponed from March to May so that the heating can be installed first."),
]
FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "embedding" / "data" / "embeddinggemma_reference.json"


def main() -> None:
    model_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else default_cache_dir() / "embeddinggemma-300m"
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    prompted = [(QUERY if kind == "query" else DOCUMENT) + text for kind, text in TEXTS]
    encodings = [tok.encode(t) for t in prompted]
    width = max(len(e.ids) for e in encodings)
    ids = torch.zeros((len(encodings), width), dtype=torch.long)  # <pad> is 0; right padding
    mask = torch.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)] = torch.tensor(e.ids)
        mask[row, : len(e.ids)] = 1
    model = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32, attn_implementation="eager").eval()
    dense = [load_file(str(model_dir / f"{n}_Dense" / "model.safetensors"))["linear.weight"] for n in (2, 3)]
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        out = pooled @ dense[0].T @ dense[1].T
        out = torch.nn.functional.normalize(out, dim=-1)
    vectors = out.numpy().astype(np.float64)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps({
        "model": "embeddinggemma-300m",
        "computed_with": f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, "
                         "Gemma3TextModel eager float32 (scripts/embeddinggemma_reference.py)",
        "texts": [{"kind": kind, "text": text, "tokens": len(e.ids)} for (kind, text), e in zip(TEXTS, encodings)],
        "vectors": [[round(float(x), 7) for x in row] for row in vectors],
    }, indent=1) + "\n")
    print(f"wrote {FIXTURE}: {len(TEXTS)} vectors of {vectors.shape[1]}; cosine between the query and the "
          f"documents: {np.round(vectors[1:] @ vectors[0], 4).tolist()}")


if __name__ == "__main__":
    main()
