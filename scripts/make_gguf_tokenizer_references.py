#!/usr/bin/env python3
"""Writes tests/data/tokenizer/gguf_<model>_reference.json: the token ids transformers' own GGUF
loader (AutoTokenizer.from_pretrained(dir, gguf_file=...), which builds a tokenizer from the GGUF's
tokenizer.ggml.* metadata) gives for the texts stk's tokenizer tests already use
(tests/data/tokenizer/hf_text.txt and sp_text.txt), for the two real models that
scripts/fetch-real-models.sh assembles.  tests/test_gguf_model.cc compares stk against them.

Run with the dev venv (transformers, tokenizers, gguf):
    bash scripts/fetch-real-models.sh
    /work/venv/bin/python scripts/make_gguf_tokenizer_references.py
"""
import json
import os
from pathlib import Path

from transformers import AutoTokenizer

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("STK_MODEL_CACHE", Path.home() / ".cache/stk/real-models"))
MODELS = {
    "smollm2": CACHE / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": CACHE / "gemma3-270m" / "gemma-3-270m-q4_k_m.gguf",
}
TEXTS = ["hf_text.txt", "sp_text.txt"]

for name, path in MODELS.items():
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    out = {"model": path.name, "loader": "transformers AutoTokenizer gguf_file", "texts": []}
    for t in TEXTS:
        text = (REPO / "tests/data/tokenizer" / t).read_text(encoding="utf-8")
        out["texts"].append({"text_file": t, "add_special": True, "token_ids": tok(text)["input_ids"],
                             "token_ids_no_special": tok(text, add_special_tokens=False)["input_ids"]})
    dst = REPO / "tests/data/tokenizer" / f"gguf_{name}_reference.json"
    dst.write_text(json.dumps(out) + "\n")
    print(dst, [len(x["token_ids"]) for x in out["texts"]])
