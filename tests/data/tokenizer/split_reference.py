#!/usr/bin/env python3
"""Reference for stk's hand-written byte-level split regexes (src/tokenizer/pretokenize.cc).

Writes split_reference.json: for each regex transformers' GGUF loader maps a tokenizer.ggml.pre
name to (GGUF_PRE_TOKENIZER_SPLITS; the Llama 3, Qwen2, Qwen3.5, GPT-4o and Tekken patterns, plus
GPT-2's), the pre-tokens HF tokenizers' Split(Regex, "isolated") cuts each text into (as UTF-8
byte offsets of their ends), and the ids GPT-2's vocabulary and merges give each text behind
Sequence[Split, ByteLevel(use_regex=False)], the pre-tokenizer Llama 3 / Qwen2 tokenizer.json
files and transformers' GGUF loader use.

Texts: English and code already in the tests, Unicode corner cases (unicode_text.txt: digit runs
of several scripts, CJK, combining marks, emoji sequences, \\r\\n runs, mixed spaces, case pairs,
contractions in every case), and seeded random text drawn from the same kinds of characters.
Run with the test venv (tokenizers), from the repository root:
    ~/.cache/stk/venv/bin/python tests/data/tokenizer/split_reference.py
"""
import json
import os
import random

import tokenizers
from tokenizers import Regex, Tokenizer, pre_tokenizers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
DATA = os.path.join(ROOT, "tests", "data")

# The patterns exactly as transformers 5.x writes them (integrations/gguf/gguf_tokenizer_mapping.py,
# models/qwen2 and qwen3_5 PRETOKENIZE_REGEX) and as Llama 3 / Qwen2 / Llama 4 / Mistral Nemo
# tokenizer.json files carry them.
SPLITS = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen35": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt-4o": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "tekken": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


POOL = (
    list("abcxyzABCXYZ0123456789 ''''''sStTlLdDmMrReEvV!?.,;:/-_()[]{}<>\"#@$%^&*+=|\\~`")
    + list("\r\n\r\n\t\n    ")
    + ["\u00a0", "\u3000", "\u2009", "\u2028", "\u0085", "\u000b", "\u000c", "\u1680", "\u202f"]
    + ["\u0661", "\u0662", "\u0967", "\u00b2", "\u00bd", "\u2167", "\u3007", "\uff11"]
    + ["\u65e5", "\u672c", "\u3042", "\u30ab", "\ud55c", "\u0915", "\u0e01", "\u05d0", "\u0628"]
    + ["\u0301", "\u0302", "\u094d", "\u0e34", "\u20dd", "\u0903", "\u200d", "\ufe0f"]
    + ["\U0001f600", "\U0001f44d", "\U0001f3fd", "\U0001f1eb", "\U0001d400", "\U00020000"]
    + ["\u00e9", "\u00c9", "\u017f", "\u01c5", "\u01c4", "\u01c6", "\u02b0", "\u1f88", "\u0130", "\u00df", "\u212a"]
)


def random_text(seed, n):
    r = random.Random(seed)
    return "".join(r.choice(POOL) for _ in range(n))


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def byte_ends(text, pieces):
    ends, pos = [], 0
    for piece, (start, end) in pieces:
        assert text[start:end] == piece
        assert start == pos, "Split isolated covers the text"
        pos = end
        ends.append(len(text[:end].encode("utf-8")))
    assert pos == len(text)
    return ends


def main():
    gpt2_json = read(os.path.join(DATA, "third_party", "gpt2", "hf-dir", "tokenizer.json"))
    old_pre = (
        '"pre_tokenizer": {\n    "type": "ByteLevel",\n    "add_prefix_space": false,\n'
        '    "trim_offsets": true,\n    "use_regex": true\n  }'
    )
    assert old_pre in gpt2_json
    texts = [
        ("hf_text.txt", read(os.path.join(DATA, "tokenizer", "hf_text.txt"))),
        ("sp_text.txt", read(os.path.join(DATA, "tokenizer", "sp_text.txt"))),
        ("gpt2 reference text", json.loads(read(os.path.join(DATA, "third_party", "gpt2", "reference_encoded_tokens.json")))["text"]),
        ("code: hf_reference.js", read(os.path.join(DATA, "tokenizer", "hf_reference.js"))),
        ("unicode_text.txt", read(os.path.join(DATA, "tokenizer", "unicode_text.txt"))),
        ("random 1", random_text(1, 1500)),
        ("random 2", random_text(2, 1500)),
    ]
    out = {"tokenizers_version": tokenizers.__version__, "splits": {}, "texts": []}
    encoders = {}
    for name, regex in SPLITS.items():
        pre = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        }
        pre_json = json.dumps(pre)
        encoders[name] = Tokenizer.from_str(gpt2_json.replace(old_pre, '"pre_tokenizer": ' + pre_json))
        encoders[name].no_truncation()  # the file keeps the max_length 50 it was saved with
        out["splits"][name] = {"regex": regex, "pre_tokenizer": pre_json}
    for title, text in texts:
        entry = {"name": title, "text": text, "pretoken_ends": {}, "token_ids": {}}
        for name, regex in SPLITS.items():
            split = pre_tokenizers.Split(Regex(regex), behavior="isolated")
            entry["pretoken_ends"][name] = byte_ends(text, split.pre_tokenize_str(text))
            entry["token_ids"][name] = encoders[name].encode(text, add_special_tokens=False).ids
        out["texts"].append(entry)
    path = os.path.join(DATA, "tokenizer", "split_reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(f"{os.path.relpath(path, ROOT)}: {len(texts)} texts x {len(SPLITS)} splits, tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
