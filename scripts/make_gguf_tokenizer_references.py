#!/usr/bin/env python3
"""Writes tests/data/tokenizer/gguf_<model>_reference.json: the token ids transformers' own GGUF
loader (AutoTokenizer.from_pretrained(dir, gguf_file=...), which builds a tokenizer from the GGUF's
tokenizer.ggml.* metadata) gives for the texts stk's tokenizer tests already use
(tests/data/tokenizer/hf_text.txt and sp_text.txt), for the real models that
scripts/fetch-real-models.sh assembles.  tests/real/real_models.sh compares stk against them.
DeepSeek-R1-Distill-Qwen-7B (a Qwen2 vocabulary split with tokenizer.ggml.pre deepseek-r1-qwen)
is only the first 2 of its 48 parts: its metadata is copied into a file with no tensors first
(tests/real/gguf_metadata_only.py), and only the ids without special tokens are compared, because
transformers' GGUF loader respells the BOS token <｜begin▁of▁sentence｜> (not in the byte-level
alphabet) and adds it again as a new id (152065, past the 152064 tokens) instead of using
tokenizer.ggml.bos_token_id 151646 as llama.cpp and stk do.  Its texts leave out hf_text.txt,
whose "<|endoftext|>" this vocabulary lacks: GPT2Tokenizer's default special tokens add it as
another new id (152064) there, where stk (and llama.cpp) encode the characters.

Run with the repository's venv (transformers, tokenizers, gguf; scripts/make-venv.sh makes it):
    bash scripts/fetch-real-models.sh
    ~/.cache/stk/venv/bin/python scripts/make_gguf_tokenizer_references.py
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from transformers import AutoTokenizer

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("STK_MODEL_CACHE")
             or Path(os.environ.get("STK_CACHE") or Path.home() / ".cache/stk") / "real-models")
MODELS = {
    "smollm2": CACHE / "smollm2-135m" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": CACHE / "gemma3-270m" / "gemma-3-270m-q4_k_m.gguf",
}
TEXTS = ["hf_text.txt", "sp_text.txt"]
# DeepSeek: a Qwen2 split (digits one by one, contractions in any case), so also the Unicode
# corner cases and code.
DEEPSEEK_TEXTS = ["sp_text.txt", "unicode_text.txt", "hf_reference.js"]
DEEPSEEK = CACHE / "deepseek-r1-distill-qwen-7b" / "INCOMPLETE-first-2-of-48-parts.gguf.part"
tmp = tempfile.mkdtemp()
subprocess.run([sys.executable, str(REPO / "tests/real/gguf_metadata_only.py"), str(DEEPSEEK), tmp + "/deepseek.gguf"],
               check=True)
MODELS["deepseek"] = Path(tmp) / "deepseek.gguf"

for name, path in MODELS.items():
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = DEEPSEEK.name + " (metadata only)" if name == "deepseek" else path.name
    out = {"model": model, "loader": "transformers AutoTokenizer gguf_file", "texts": []}
    for t in DEEPSEEK_TEXTS if name == "deepseek" else TEXTS:
        text = (REPO / "tests/data/tokenizer" / t).read_bytes().decode("utf-8")  # \r\n kept
        out["texts"].append({"text_file": t, "add_special": True, "token_ids": tok(text)["input_ids"],
                             "token_ids_no_special": tok(text, add_special_tokens=False)["input_ids"]})
    dst = REPO / "tests/data/tokenizer" / f"gguf_{name}_reference.json"
    dst.write_text(json.dumps(out) + "\n")
    print(dst, [len(x["token_ids"]) for x in out["texts"]])
