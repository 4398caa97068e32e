#!/usr/bin/python3
"""Write a benchmark checkpoint of a real model's shape (not in the repo: under $STK_BENCH_DATA,
the benchmark data folder of docs/benchmarks.md, build/bench-data by default).

  /usr/bin/python3 bench/parse_make_checkpoint.py llama7b $STK_BENCH_DATA/llama7b
  /usr/bin/python3 bench/parse_make_checkpoint.py gpt2    $STK_BENCH_DATA/gpt2
  /usr/bin/python3 bench/parse_make_checkpoint.py llama7b-8 $STK_BENCH_DATA/llama7b-8

llama7b: Llama-2-7B's names and shapes (d 4096, 32 layers, ffn 11008, vocab 32000, 6.74e9
parameters), BF16, three safetensors shards + model.safetensors.index.json (about 13.5 GB).
llama7b-8: the same with 8 of its 32 layers (every matrix the 7B shape's; about 3.7 GB): the LM
runtime's decode bench on a 2-core box with 24 GiB (docs/benchmarks.md "LM runtime").
gpt2: GPT-2 small (124,439,808 parameters) as F32 safetensors with its attn.bias buffers.

The values are a 4 MiB block of finite random numbers (fixed seed) repeated: the reader and the
converter do the same work on them as on real weights, and writing stays disk-bound.
Files follow the safetensors format (u64 LE header length, JSON header padded with spaces to 8
bytes, tensors contiguous in name order).
"""
import json
import os
import struct
import sys

import numpy as np

BLOCK = 4 << 20


def block(dtype):
    rng = np.random.default_rng(1234)
    x = (rng.standard_normal(BLOCK // 2, dtype=np.float32) * 0.02)
    if dtype == "BF16":
        return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return x.tobytes() + x.tobytes()


ESIZE = {"BF16": 2, "F32": 4}


def write_shard(path, tensors, dtype):
    """tensors: list of (name, shape).  Returns {name: byte size}."""
    tensors = sorted(tensors)
    header, off, sizes = {"__metadata__": {"format": "pt"}}, 0, {}
    for name, shape in tensors:
        n = int(np.prod(shape)) * ESIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        sizes[name] = n
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    data = block(dtype)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, shape in tensors:
            left = sizes[name]
            while left:
                k = min(left, len(data))
                f.write(data[:k])
                left -= k
    os.rename(path + ".tmp", path)
    return sizes


def llama7b(out, L=32):
    V, D, F = 32000, 4096, 11008
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": D,
           "intermediate_size": F, "max_position_embeddings": 4096, "num_attention_heads": 32,
           "num_hidden_layers": L, "num_key_value_heads": 32, "rms_norm_eps": 1e-05, "rope_scaling": None,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": V}
    layers = []
    for i in range(L):
        p = "model.layers.%d." % i
        layers.append([(p + "input_layernorm.weight", (D,)), (p + "post_attention_layernorm.weight", (D,)),
                       (p + "self_attn.q_proj.weight", (D, D)), (p + "self_attn.k_proj.weight", (D, D)),
                       (p + "self_attn.v_proj.weight", (D, D)), (p + "self_attn.o_proj.weight", (D, D)),
                       (p + "mlp.gate_proj.weight", (F, D)), (p + "mlp.up_proj.weight", (F, D)),
                       (p + "mlp.down_proj.weight", (D, F))])
    a, b = (L * 11 + 31) // 32, (L * 22 + 31) // 32  # 0:11, 11:22, 22:32 at 32 layers
    shards = [[("model.embed_tokens.weight", (V, D))] + sum(layers[0:a], []),
              sum(layers[a:b], []),
              sum(layers[b:L], []) + [("model.norm.weight", (D,)), ("lm_head.weight", (V, D))]]
    weight_map, total = {}, 0
    for s, tensors in enumerate(shards):
        name = "model-%05d-of-00003.safetensors" % (s + 1)
        sizes = write_shard(os.path.join(out, name), tensors, "BF16")
        for t in sizes:
            weight_map[t] = name
            total += sizes[t]
        print("wrote", name, flush=True)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1, sort_keys=True)
    return cfg


def gpt2(out):
    V, P, D, L = 50257, 1024, 768, 12
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
           "n_ctx": P, "n_embd": D, "n_head": 12, "n_layer": L, "n_positions": P, "layer_norm_epsilon": 1e-05,
           "vocab_size": V}
    t = [("wte.weight", (V, D)), ("wpe.weight", (P, D)), ("ln_f.weight", (D,)), ("ln_f.bias", (D,))]
    for i in range(L):
        p = "h.%d." % i
        t += [(p + "ln_1.weight", (D,)), (p + "ln_1.bias", (D,)), (p + "attn.bias", (1, 1, P, P)),
              (p + "attn.c_attn.weight", (D, 3 * D)), (p + "attn.c_attn.bias", (3 * D,)),
              (p + "attn.c_proj.weight", (D, D)), (p + "attn.c_proj.bias", (D,)),
              (p + "ln_2.weight", (D,)), (p + "ln_2.bias", (D,)), (p + "mlp.c_fc.weight", (D, 4 * D)),
              (p + "mlp.c_fc.bias", (4 * D,)), (p + "mlp.c_proj.weight", (4 * D, D)), (p + "mlp.c_proj.bias", (D,))]
    write_shard(os.path.join(out, "model.safetensors"), t, "F32")
    return cfg


if __name__ == "__main__":
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    cfg = {"llama7b": llama7b, "llama7b-8": lambda o: llama7b(o, 8), "gpt2": gpt2}[kind](out)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    print("done", out)
