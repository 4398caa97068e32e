#!/usr/bin/python3
"""Regenerate tests/data/models/<name>/: tiny checkpoints in the real on-disk formats.

Run with Debian's python3-torch:  /usr/bin/python3 scripts/make_model_fixtures.py [OUT_DIR]

- pytorch_model.bin files are written by torch.save itself (the zip format of torch >= 1.6).
- safetensors files are written by the small writer below, which follows the published format
  (https://github.com/huggingface/safetensors#format): u64 LE header length N, N bytes of UTF-8
  JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}} padded with
  spaces to a multiple of 8, then the byte buffer; tensors sorted by name, contiguous, no holes.
  (python3-safetensors is not packaged in Debian 12: `apt-cache policy python3-safetensors`.)
- Tensor names and layouts are those of the HuggingFace checkpoints of each family.
- Values come from torch.Generator with fixed seeds: the output is byte-for-byte reproducible
  for one torch version (1.13 here).

Each directory also gets expected.json: the parameter count and a few elements of the role
tensors AFTER our canonical transforms (Conv1D transpose, fused QKV split), computed here with
the layouts written out the way HF's own modelling code slices them, so the C++ tests check
values against an independent implementation.
"""
import json
import os
import struct
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "models")

ST_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}


def st_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    names = sorted(tensors)
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    blobs = []
    for n in names:
        b = st_bytes(tensors[n])
        header[n] = {"dtype": ST_DTYPES[tensors[n].dtype], "shape": list(tensors[n].shape),
                     "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_sharded_safetensors(d, tensors, n_shards):
    names = sorted(tensors)
    per = (len(names) + n_shards - 1) // n_shards
    weight_map = {}
    total = 0
    for s in range(n_shards):
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, n_shards)
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(d, fname), part, {"format": "pt"})
        for n in part:
            weight_map[n] = fname
            total += len(st_bytes(part[n]))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
        f.write("\n")


class Gen:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def randn(self, *shape, scale=0.05):
        return torch.randn(*shape, generator=self.g) * scale

    def ones_ish(self, n):
        return 1.0 + torch.randn(n, generator=self.g) * 0.01


def save_dir(name, config, tensors_fn):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    return d


def n_params(tensors, buffers):
    return sum(t.numel() for n, t in tensors.items() if n not in buffers)


def check(role, layer, index, value, expert=-1, norm=None):
    c = {"role": role, "layer": layer, "expert": expert, "index": list(index), "value": float(value)}
    if norm:
        c["norm"] = norm  # which norm of the block: attn, ffn, final, emb
    return c


def write_expected(d, n, checks, extra=None):
    e = {"n_params": n, "checks": checks}
    if extra:
        e.update(extra)
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(e, f, indent=2, sort_keys=True)
        f.write("\n")


# ------------------------------------------------------------------------------------------------
def gpt2():
    V, P, D, L, H = 64, 16, 32, 2, 4
    cfg = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
           "n_ctx": P, "n_embd": D, "n_head": H, "n_inner": None, "n_layer": L, "n_positions": P,
           "layer_norm_epsilon": 1e-05, "vocab_size": V, "bos_token_id": 0, "eos_token_id": 0,
           "torch_dtype": "float32", "transformers_version": "4.37.2"}
    g = Gen(1)
    t = {"wte.weight": g.randn(V, D), "wpe.weight": g.randn(P, D)}
    buffers = set()
    for i in range(L):
        p = "h.%d." % i
        t[p + "ln_1.weight"] = g.ones_ish(D)
        t[p + "ln_1.bias"] = g.randn(D)
        t[p + "attn.c_attn.weight"] = g.randn(D, 3 * D)  # Conv1D: [in, out]
        t[p + "attn.c_attn.bias"] = g.randn(3 * D)
        t[p + "attn.c_proj.weight"] = g.randn(D, D)
        t[p + "attn.c_proj.bias"] = g.randn(D)
        t[p + "ln_2.weight"] = g.ones_ish(D)
        t[p + "ln_2.bias"] = g.randn(D)
        t[p + "mlp.c_fc.weight"] = g.randn(D, 4 * D)
        t[p + "mlp.c_fc.bias"] = g.randn(4 * D)
        t[p + "mlp.c_proj.weight"] = g.randn(4 * D, D)
        t[p + "mlp.c_proj.bias"] = g.randn(D)
        # The buffers the hub's gpt2 pytorch_model.bin carries: causal mask and masked_bias.
        t[p + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
        t[p + "attn.masked_bias"] = torch.tensor(-1e4)
        buffers |= {p + "attn.bias", p + "attn.masked_bias"}
    t["ln_f.weight"] = g.ones_ish(D)
    t["ln_f.bias"] = g.randn(D)
    d = save_dir("gpt2", cfg, None)
    torch.save(t, os.path.join(d, "pytorch_model.bin"))
    ca = t["h.1.attn.c_attn.weight"]
    # HF GPT2Attention: q, k, v = c_attn(x).split(D, dim=2), c_attn(x) = x @ W + b with W [in, out]
    # -> Q as an [out, in] matrix is W[:, 0:D].T; K is W[:, D:2D].T.
    checks = [
        check("Q", 1, (3, 5), ca[:, 0:D].t()[3, 5]),
        check("K", 1, (7, 30), ca[:, D:2 * D].t()[7, 30]),
        check("V", 1, (31, 0), ca[:, 2 * D:3 * D].t()[31, 0]),
        check("Q_B", 0, (9,), t["h.0.attn.c_attn.bias"][9]),
        check("V_B", 0, (2,), t["h.0.attn.c_attn.bias"][2 * D + 2]),
        check("O", 0, (1, 2), t["h.0.attn.c_proj.weight"].t()[1, 2]),
        check("FFN_W1", 0, (100, 4), t["h.0.mlp.c_fc.weight"].t()[100, 4]),
        check("FFN_W2", 1, (4, 100), t["h.1.mlp.c_proj.weight"].t()[4, 100]),
        check("EMB", -1, (63, 31), t["wte.weight"][63, 31]),
        check("POS_EMB", -1, (15, 0), t["wpe.weight"][15, 0]),
    ]
    write_expected(d, n_params(t, buffers), checks, {"n_buffers": len(buffers), "n_source_tensors": len(t)})


def llama():
    V, D, L, H, KV, F = 96, 64, 2, 4, 2, 128
    hd = D // H
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
           "hidden_size": D, "intermediate_size": F, "max_position_embeddings": 128,
           "num_attention_heads": H, "num_hidden_layers": L, "num_key_value_heads": KV,
           "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False,
           "torch_dtype": "bfloat16", "vocab_size": V, "bos_token_id": 1, "eos_token_id": 2,
           "attention_bias": False, "mlp_bias": False, "transformers_version": "4.42.3"}
    g = Gen(2)
    t = {"model.embed_tokens.weight": g.randn(V, D), "lm_head.weight": g.randn(V, D),
         "model.norm.weight": g.ones_ish(D)}
    buffers = set()
    for i in range(L):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = g.ones_ish(D)
        t[p + "post_attention_layernorm.weight"] = g.ones_ish(D)
        t[p + "self_attn.q_proj.weight"] = g.randn(H * hd, D)
        t[p + "self_attn.k_proj.weight"] = g.randn(KV * hd, D)
        t[p + "self_attn.v_proj.weight"] = g.randn(KV * hd, D)
        t[p + "self_attn.o_proj.weight"] = g.randn(D, H * hd)
        t[p + "mlp.gate_proj.weight"] = g.randn(F, D)
        t[p + "mlp.up_proj.weight"] = g.randn(F, D)
        t[p + "mlp.down_proj.weight"] = g.randn(D, F)
        # Older Llama checkpoints stored the rotary frequencies as a buffer.
        t[p + "self_attn.rotary_emb.inv_freq"] = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        buffers.add(p + "self_attn.rotary_emb.inv_freq")
    t = {k: v.to(torch.bfloat16) for k, v in t.items()}
    d = save_dir("llama", cfg, None)
    write_sharded_safetensors(d, t, 2)
    f = lambda x: float(x.float())
    checks = [
        check("K", 1, (31, 63), f(t["model.layers.1.self_attn.k_proj.weight"][31, 63])),
        check("FFN_W3", 0, (127, 1), f(t["model.layers.0.mlp.up_proj.weight"][127, 1])),
        check("FFN_W1", 1, (5, 6), f(t["model.layers.1.mlp.gate_proj.weight"][5, 6])),
        check("LM_HEAD", -1, (95, 63), f(t["lm_head.weight"][95, 63])),
        check("ROPE_ALPHA", 0, (1,), f(t["model.layers.0.self_attn.rotary_emb.inv_freq"][1])),
    ]
    write_expected(d, n_params(t, buffers), checks, {"n_buffers": len(buffers), "n_source_tensors": len(t)})
    # The same values stored as F32 in one unsharded file: parse_tensors' digest must not change.
    d32 = save_dir("llama_f32", dict(cfg, torch_dtype="float32"), None)
    write_safetensors(os.path.join(d32, "model.safetensors"), {k: v.float() for k, v in t.items()})
    write_expected(d32, n_params(t, buffers), checks, {"n_buffers": len(buffers), "n_source_tensors": len(t)})


def mixtral():
    V, D, L, H, KV, F, E = 64, 32, 2, 4, 2, 48, 4
    hd = D // H
    cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
           "hidden_size": D, "intermediate_size": F, "max_position_embeddings": 256,
           "num_attention_heads": H, "num_hidden_layers": L, "num_key_value_heads": KV,
           "num_local_experts": E, "num_experts_per_tok": 2, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
           "router_aux_loss_coef": 0.02, "sliding_window": None, "tie_word_embeddings": False,
           "torch_dtype": "bfloat16", "vocab_size": V, "transformers_version": "4.36.0"}
    g = Gen(3)
    t = {"model.embed_tokens.weight": g.randn(V, D), "lm_head.weight": g.randn(V, D),
         "model.norm.weight": g.ones_ish(D)}
    for i in range(L):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = g.ones_ish(D)
        t[p + "post_attention_layernorm.weight"] = g.ones_ish(D)
        t[p + "self_attn.q_proj.weight"] = g.randn(H * hd, D)
        t[p + "self_attn.k_proj.weight"] = g.randn(KV * hd, D)
        t[p + "self_attn.v_proj.weight"] = g.randn(KV * hd, D)
        t[p + "self_attn.o_proj.weight"] = g.randn(D, H * hd)
        # Router rows with distinct norms so the expert order by magnitude (seed 3.3/9.1) is known.
        gate = g.randn(E, D)
        for e in range(E):
            gate[e] *= [0.5, 2.0, 1.0, 3.0][(e + i) % 4]
        t[p + "block_sparse_moe.gate.weight"] = gate
        for e in range(E):
            q = p + "block_sparse_moe.experts.%d." % e
            t[q + "w1"] = g.randn(F, D)
            t[q + "w2"] = g.randn(D, F)
            t[q + "w3"] = g.randn(F, D)
    # Mixtral checkpoints name the expert matrices "...w1.weight".
    t = {(k + ".weight" if ".experts." in k and not k.endswith(".weight") else k): v for k, v in t.items()}
    t = {k: v.to(torch.bfloat16) for k, v in t.items()}
    d = save_dir("mixtral", cfg, None)
    write_safetensors(os.path.join(d, "model.safetensors"), t, {"format": "pt"})
    f = lambda x: float(x.float())
    order = []
    for i in range(L):
        gate = t["model.layers.%d.block_sparse_moe.gate.weight" % i].float().double()
        norms = [float(gate[e].norm()) for e in range(E)]
        order.append(sorted(range(E), key=lambda e: (-norms[e], e)))
    checks = [
        check("FFN_W1", 1, (47, 31), f(t["model.layers.1.block_sparse_moe.experts.3.w1.weight"][47, 31]), 3),
        check("FFN_W2", 0, (0, 47), f(t["model.layers.0.block_sparse_moe.experts.2.w2.weight"][0, 47]), 2),
        check("FFN_W3", 0, (1, 1), f(t["model.layers.0.block_sparse_moe.experts.0.w3.weight"][1, 1]), 0),
        check("ROUTER_GATE", 1, (2, 3), f(t["model.layers.1.block_sparse_moe.gate.weight"][2, 3])),
    ]
    write_expected(d, n_params(t, set()), checks, {"expert_order": order, "n_buffers": 0, "n_source_tensors": len(t)})


def gpt_neox():
    V, D, L, H, F, P = 80, 32, 2, 4, 128, 64
    hd = D // H
    cfg = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_act": "gelu",
           "hidden_size": D, "intermediate_size": F, "layer_norm_eps": 1e-05, "max_position_embeddings": P,
           "num_attention_heads": H, "num_hidden_layers": L, "rotary_emb_base": 10000, "rotary_pct": 0.25,
           "tie_word_embeddings": False, "torch_dtype": "float16", "use_parallel_residual": True,
           "vocab_size": V, "bos_token_id": 0, "eos_token_id": 0, "transformers_version": "4.28.1"}
    g = Gen(4)
    t = {"gpt_neox.embed_in.weight": g.randn(V, D), "embed_out.weight": g.randn(V, D),
         "gpt_neox.final_layer_norm.weight": g.ones_ish(D), "gpt_neox.final_layer_norm.bias": g.randn(D)}
    buffers = set()
    rot = int(hd * 0.25)
    for i in range(L):
        p = "gpt_neox.layers.%d." % i
        t[p + "input_layernorm.weight"] = g.ones_ish(D)
        t[p + "input_layernorm.bias"] = g.randn(D)
        t[p + "post_attention_layernorm.weight"] = g.ones_ish(D)
        t[p + "post_attention_layernorm.bias"] = g.randn(D)
        t[p + "attention.query_key_value.weight"] = g.randn(3 * D, D)
        t[p + "attention.query_key_value.bias"] = g.randn(3 * D)
        t[p + "attention.dense.weight"] = g.randn(D, D)
        t[p + "attention.dense.bias"] = g.randn(D)
        t[p + "mlp.dense_h_to_4h.weight"] = g.randn(F, D)
        t[p + "mlp.dense_h_to_4h.bias"] = g.randn(F)
        t[p + "mlp.dense_4h_to_h.weight"] = g.randn(D, F)
        t[p + "mlp.dense_4h_to_h.bias"] = g.randn(D)
        t[p + "attention.bias"] = torch.tril(torch.ones(P, P, dtype=torch.bool)).view(1, 1, P, P)
        t[p + "attention.masked_bias"] = torch.tensor(-1e9)
        t[p + "attention.rotary_emb.inv_freq"] = 1.0 / (10000 ** (torch.arange(0, rot, 2).float() / rot))
        buffers |= {p + "attention.bias", p + "attention.masked_bias", p + "attention.rotary_emb.inv_freq"}
    t = {k: (v.to(torch.float16) if v.dtype == torch.float32 else v) for k, v in t.items()}
    d = save_dir("gpt_neox", cfg, None)
    torch.save(t, os.path.join(d, "pytorch_model.bin"))
    f = lambda x: float(x.float())
    # HF GPTNeoXAttention: qkv.view(..., heads, 3 * head_size) then q = [..., :hs], k = [hs:2hs]:
    # the weight's rows are [heads, 3, head_dim].
    w = t["gpt_neox.layers.1.attention.query_key_value.weight"].view(H, 3, hd, D)
    b = t["gpt_neox.layers.0.attention.query_key_value.bias"].view(H, 3, hd)
    checks = [
        check("Q", 1, (2 * hd + 3, 7), f(w[2, 0, 3, 7])),
        check("K", 1, (hd + 1, 0), f(w[1, 1, 1, 0])),
        check("V", 1, (3 * hd + 7, 31), f(w[3, 2, 7, 31])),
        check("K_B", 0, (5,), f(b[0, 1, 5])),
        check("LM_HEAD", -1, (79, 1), f(t["embed_out.weight"][79, 1])),
    ]
    write_expected(d, n_params(t, buffers), checks, {"n_buffers": len(buffers), "n_source_tensors": len(t)})


def bloom():
    V, D, L, H = 72, 32, 2, 4
    hd = D // H
    cfg = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": D, "n_head": H,
           "n_layer": L, "layer_norm_epsilon": 1e-05, "vocab_size": V, "bos_token_id": 1, "eos_token_id": 2,
           "apply_residual_connection_post_layernorm": False, "torch_dtype": "float16",
           "transformers_version": "4.27.1"}
    g = Gen(5)
    t = {"word_embeddings.weight": g.randn(V, D), "word_embeddings_layernorm.weight": g.ones_ish(D),
         "word_embeddings_layernorm.bias": g.randn(D), "ln_f.weight": g.ones_ish(D), "ln_f.bias": g.randn(D)}
    for i in range(L):
        p = "h.%d." % i
        t[p + "input_layernorm.weight"] = g.ones_ish(D)
        t[p + "input_layernorm.bias"] = g.randn(D)
        t[p + "self_attention.query_key_value.weight"] = g.randn(3 * D, D)
        t[p + "self_attention.query_key_value.bias"] = g.randn(3 * D)
        t[p + "self_attention.dense.weight"] = g.randn(D, D)
        t[p + "self_attention.dense.bias"] = g.randn(D)
        t[p + "post_attention_layernorm.weight"] = g.ones_ish(D)
        t[p + "post_attention_layernorm.bias"] = g.randn(D)
        t[p + "mlp.dense_h_to_4h.weight"] = g.randn(4 * D, D)
        t[p + "mlp.dense_h_to_4h.bias"] = g.randn(4 * D)
        t[p + "mlp.dense_4h_to_h.weight"] = g.randn(D, 4 * D)
        t[p + "mlp.dense_4h_to_h.bias"] = g.randn(D)
    t = {k: v.to(torch.float16) for k, v in t.items()}
    d = save_dir("bloom", cfg, None)
    write_safetensors(os.path.join(d, "model.safetensors"), t, {"format": "pt"})
    f = lambda x: float(x.float())
    # HF BloomAttention._split_heads: view(batch, seq, heads, 3, head_dim).
    w = t["h.0.self_attention.query_key_value.weight"].view(H, 3, hd, D)
    checks = [
        check("Q", 0, (hd + 2, 5), f(w[1, 0, 2, 5])),
        check("V", 0, (0, 0), f(w[0, 2, 0, 0])),
        check("FFN_B1", 1, (127,), f(t["h.1.mlp.dense_h_to_4h.bias"][127])),
        check("LN_B", -1, (3,), f(t["word_embeddings_layernorm.bias"][3]), norm="emb"),
        check("LN_G", -1, (30,), f(t["ln_f.weight"][30]), norm="final"),
    ]
    write_expected(d, n_params(t, set()), checks, {"n_buffers": 0, "n_source_tensors": len(t)})


def qwen2_moe():
    V, D, L, H, KV, F, MF, SF, E = 64, 32, 2, 4, 4, 64, 16, 40, 4
    hd = D // H
    cfg = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_act": "silu",
           "hidden_size": D, "intermediate_size": F, "max_position_embeddings": 512,
           "num_attention_heads": H, "num_hidden_layers": L, "num_key_value_heads": KV,
           "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": False,
           "torch_dtype": "float32", "vocab_size": V, "decoder_sparse_step": 1, "moe_intermediate_size": MF,
           "shared_expert_intermediate_size": SF, "num_experts_per_tok": 2, "num_experts": E,
           "norm_topk_prob": False, "mlp_only_layers": [], "transformers_version": "4.40.0"}
    g = Gen(6)
    t = {"model.embed_tokens.weight": g.randn(V, D), "lm_head.weight": g.randn(V, D),
         "model.norm.weight": g.ones_ish(D)}
    for i in range(L):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = g.ones_ish(D)
        t[p + "post_attention_layernorm.weight"] = g.ones_ish(D)
        for n, rows in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
            t[p + "self_attn.%s_proj.weight" % n] = g.randn(rows, D)
            t[p + "self_attn.%s_proj.bias" % n] = g.randn(rows)
        t[p + "self_attn.o_proj.weight"] = g.randn(D, H * hd)
        t[p + "mlp.gate.weight"] = g.randn(E, D)
        for e in range(E):
            q = p + "mlp.experts.%d." % e
            t[q + "gate_proj.weight"] = g.randn(MF, D)
            t[q + "up_proj.weight"] = g.randn(MF, D)
            t[q + "down_proj.weight"] = g.randn(D, MF)
        t[p + "mlp.shared_expert.gate_proj.weight"] = g.randn(SF, D)
        t[p + "mlp.shared_expert.up_proj.weight"] = g.randn(SF, D)
        t[p + "mlp.shared_expert.down_proj.weight"] = g.randn(D, SF)
        t[p + "mlp.shared_expert_gate.weight"] = g.randn(1, D)
    d = save_dir("qwen2_moe", cfg, None)
    write_safetensors(os.path.join(d, "model.safetensors"), t, {"format": "pt"})
    checks = [
        check("FFN_W2", 1, (31, 39), t["model.layers.1.mlp.shared_expert.down_proj.weight"][31, 39], -2),
        check("FFN_W1", 0, (15, 0), t["model.layers.0.mlp.experts.3.gate_proj.weight"][15, 0], 3),
        check("SHARED_GATE", 1, (0, 9), t["model.layers.1.mlp.shared_expert_gate.weight"][0, 9]),
        check("Q_B", 0, (31,), t["model.layers.0.self_attn.q_proj.bias"][31]),
    ]
    write_expected(d, n_params(t, set()), checks, {"n_buffers": 0, "n_source_tensors": len(t)})


def nonfinite():
    """A tiny f32 llama with one NaN and one +Inf in layer 1 (the conversion policy's test)."""
    V, D, L, H, F = 32, 16, 2, 2, 32
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
           "hidden_size": D, "intermediate_size": F, "max_position_embeddings": 64, "num_attention_heads": H,
           "num_hidden_layers": L, "num_key_value_heads": H, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
           "tie_word_embeddings": True, "torch_dtype": "float32", "vocab_size": V}
    g = Gen(7)
    t = {"model.embed_tokens.weight": g.randn(V, D), "model.norm.weight": g.ones_ish(D)}
    for i in range(L):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = g.ones_ish(D)
        t[p + "post_attention_layernorm.weight"] = g.ones_ish(D)
        for n in "qkvo":
            t[p + "self_attn.%s_proj.weight" % n] = g.randn(D, D)
        t[p + "mlp.gate_proj.weight"] = g.randn(F, D)
        t[p + "mlp.up_proj.weight"] = g.randn(F, D)
        t[p + "mlp.down_proj.weight"] = g.randn(D, F)
    t["model.layers.1.mlp.down_proj.weight"][3, 4] = float("nan")
    t["model.layers.1.mlp.down_proj.weight"][5, 6] = float("inf")
    d = save_dir("nonfinite", cfg, None)
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    write_expected(d, n_params(t, set()), [], {"n_nonfinite": 2, "n_buffers": 0, "n_source_tensors": len(t)})


if __name__ == "__main__":
    torch.set_num_threads(1)
    for fn in (gpt2, llama, mixtral, gpt_neox, bloom, qwen2_moe, nonfinite):
        fn()
    total = 0
    for root, _, files in os.walk(OUT):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    print("wrote %s: %d bytes" % (OUT, total))
