#!/usr/bin/env python3
"""Writes bindings/testdata/tiny-gpt2: a GPT-2-shaped HF model directory small enough to commit.

The bindings' tests only need an in_dir that stk_job_arena_size / stk_open accept, so this is the
smallest directory laid out as the hub ships GPT-2: config.json, model.safetensors with the hub's
tensor names (no "transformer." prefix, attn.bias buffers included, lm_head tied so absent), and
a byte-level vocab.json + merges.txt (256 byte tokens in GPT-2's byte-to-unicode form, a few
merges, <|endoftext|>).  The safetensors file is written here as the safetensors library writes
it (the `safetensors` Python package is not installed): u64 LE header length, JSON header padded
with spaces to 8 bytes, tensors sorted by name, contiguous.  Deterministic: fixed seed and order.

Run with Debian's python3 (it has torch):  /usr/bin/python3 bindings/testdata/generate.py
"""
import json
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny-gpt2")
N_EMBD, N_LAYER, N_HEAD, N_POS = 16, 2, 2, 32


def bytes_to_unicode():
    # GPT-2's reversible byte -> printable unicode map (openai/gpt-2 encoder.py).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    os.makedirs(OUT, exist_ok=True)
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    n_vocab = len(vocab)

    with open(os.path.join(OUT, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(OUT, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")

    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": n_vocab,
        "n_embd": N_EMBD,
        "n_layer": N_LAYER,
        "n_head": N_HEAD,
        "n_positions": N_POS,
        "n_ctx": N_POS,
        "n_inner": None,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-05,
        "bos_token_id": n_vocab - 1,
        "eos_token_id": n_vocab - 1,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    g = torch.Generator().manual_seed(20261121)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.float32)

    sd = {"wte.weight": rnd(n_vocab, N_EMBD), "wpe.weight": rnd(N_POS, N_EMBD)}
    for i in range(N_LAYER):
        p = f"h.{i}."
        sd[p + "ln_1.weight"] = torch.ones(N_EMBD)
        sd[p + "ln_1.bias"] = torch.zeros(N_EMBD)
        sd[p + "attn.bias"] = torch.tril(torch.ones(N_POS, N_POS)).view(1, 1, N_POS, N_POS)  # a buffer
        sd[p + "attn.c_attn.weight"] = rnd(N_EMBD, 3 * N_EMBD)  # Conv1D: (in, out)
        sd[p + "attn.c_attn.bias"] = rnd(3 * N_EMBD)
        sd[p + "attn.c_proj.weight"] = rnd(N_EMBD, N_EMBD)
        sd[p + "attn.c_proj.bias"] = rnd(N_EMBD)
        sd[p + "ln_2.weight"] = torch.ones(N_EMBD)
        sd[p + "ln_2.bias"] = torch.zeros(N_EMBD)
        sd[p + "mlp.c_fc.weight"] = rnd(N_EMBD, 4 * N_EMBD)
        sd[p + "mlp.c_fc.bias"] = rnd(4 * N_EMBD)
        sd[p + "mlp.c_proj.weight"] = rnd(4 * N_EMBD, N_EMBD)
        sd[p + "mlp.c_proj.bias"] = rnd(N_EMBD)
    sd["ln_f.weight"] = torch.ones(N_EMBD)
    sd["ln_f.bias"] = torch.zeros(N_EMBD)
    write_safetensors(sd, os.path.join(OUT, "model.safetensors"))


def write_safetensors(tensors, path):
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].contiguous().to(torch.float32)
        data = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)

if __name__ == "__main__":
    main()
