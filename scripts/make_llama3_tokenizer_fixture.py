#!/usr/bin/env python3
"""Writes tests/data/tokenizer/llama3-bpe/: a small Llama-3-style tokenizer in both forms a Llama 3
model ships it, and the ids the references give for the texts stk's tokenizer tests already use.

  tokenizer.json   a byte-level BPE trained here by HF tokenizers (BpeTrainer, 420 tokens) on
                   those texts, laid out as Meta's Llama 3 tokenizer.json is: the pre-tokenizer
                   Sequence [Split(Llama 3's regex, Isolated), ByteLevel(use_regex false)],
                   model BPE with ignore_merges true, <|begin_of_text|> / <|end_of_text|> as
                   special added tokens after the vocabulary, TemplateProcessing putting
                   <|begin_of_text|> first.  The eight longest pre-tokens of the texts that are not
                   tokens are added to the vocabulary with no merge that builds them, so ignore_merges changes ids.
  gguf/llama-bpe.gguf
                   the same vocabulary as llama.cpp's converter writes it: tokenizer.ggml.model
                   gpt2, tokenizer.ggml.pre llama-bpe, tokens, token_type (special tokens
                   CONTROL), merges, bos id, add_bos_token true; gguf-py's writer, no tensors.
  reference.json   per text: the ids HF tokenizers gives with tokenizer.json (with and without
                   special tokens), and the ids transformers' GGUF loader
                   (AutoTokenizer.from_pretrained(dir, gguf_file=...)) gives with the GGUF.  The
                   loader builds a BPE without ignore_merges, so on those eight pre-tokens it
                   gives the merged pieces where tokenizer.json gives the word's own id.

tests/test_bpe.cc (llama3_bpe_fixture_matches_references) compares stk with both.
Run with a venv holding tokenizers, transformers (with its GGUF loader) and gguf:
    python scripts/make_llama3_tokenizer_fixture.py
"""
import json
from pathlib import Path

import gguf
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests/data/tokenizer"
OUT = DATA / "llama3-bpe"
TEXTS = ["hf_text.txt", "sp_text.txt", "unicode_text.txt", "hf_reference.js"]
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|endoftext|>"]


def read(name):
    return (DATA / name).read_bytes().decode("utf-8")  # \r\n kept


def main():
    OUT.mkdir(exist_ok=True)
    split = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = split
    t.train_from_iterator([read(x) for x in TEXTS],
                          trainers.BpeTrainer(vocab_size=420, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                              show_progress=False))
    model = json.loads(t.to_str())["model"]
    vocab, merges = model["vocab"], model["merges"]
    # The eight longest pre-tokens of the texts (ties: in text order) that are not tokens.
    words = []
    for name in TEXTS:
        for piece, _ in split.pre_tokenize_str(read(name)):
            if piece not in vocab and piece not in words and len(piece) >= 4:
                words.append(piece)
    words = sorted(words, key=len, reverse=True)[:8]
    for piece in words:
        vocab[piece] = len(vocab)
    print("whole words added:", words)
    n = len(vocab)
    tj = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in merges], ignore_merges=True))
    tj.pre_tokenizer = split
    tj.decoder = decoders.ByteLevel()
    tj.add_special_tokens(SPECIAL)
    tj.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", n)]),
    ])
    tj.save(str(OUT / "tokenizer.json"))

    tokens = [None] * (n + len(SPECIAL))
    for k, i in vocab.items():
        tokens[i] = k
    for i, s in enumerate(SPECIAL):
        tokens[n + i] = s
    (OUT / "gguf").mkdir(exist_ok=True)
    w = gguf.GGUFWriter(str(OUT / "gguf" / "llama-bpe.gguf"), "llama")
    w.add_name("llama3-bpe tokenizer fixture")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if i >= n else gguf.TokenType.NORMAL for i in range(len(tokens))])
    w.add_token_merges([" ".join(m) for m in merges])
    w.add_bos_token_id(n)
    w.add_eos_token_id(n + 1)
    w.add_add_bos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()

    hf = Tokenizer.from_file(str(OUT / "tokenizer.json"))
    # In a folder of its own: beside a tokenizer.json, AutoTokenizer (and stk given the folder)
    # would read that instead of the GGUF.
    tg = AutoTokenizer.from_pretrained(str(OUT / "gguf"), gguf_file="llama-bpe.gguf")
    out = {"tokenizer_json": "HF tokenizers Tokenizer.from_file (ignore_merges true)",
           "gguf": "transformers AutoTokenizer gguf_file (no ignore_merges)", "bos_id": n, "texts": []}
    for name in TEXTS:
        text = read(name)
        out["texts"].append({
            "text_file": name,
            "tokenizer_json": hf.encode(text).ids,
            "tokenizer_json_no_special": hf.encode(text, add_special_tokens=False).ids,
            "gguf": tg(text)["input_ids"],
            "gguf_no_special": tg(text, add_special_tokens=False)["input_ids"],
        })
        x = out["texts"][-1]
        print(name, len(x["tokenizer_json"]), len(x["gguf"]),
              "ignore_merges changes ids" if x["tokenizer_json"] != x["gguf"] else "same ids")
    (OUT / "reference.json").write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
