#!/usr/bin/python3
"""Write the mid-size checkpoint bench/attention_bench.cc times (not in the repo):

  /usr/bin/python3 bench/attention_bench.py $STK_BENCH_DATA/attn_mid

($STK_BENCH_DATA: the benchmark data folder, docs/benchmarks.md; build/bench-data by default.)

Llama names and layout at d_model 2048, 4 layers, 16 heads (head_dim 128, no GQA), FFN 2048,
vocab 2048, BF16, one safetensors file (about 235 MB).  Values come from
parse_make_checkpoint.py's repeated random block (timing only: the spectra are not a trained
model's).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parse_make_checkpoint import write_shard  # noqa: E402

D, L, H, F, V = 2048, 4, 16, 2048, 2048


def main(out):
    os.makedirs(out, exist_ok=True)
    t = [("model.embed_tokens.weight", (V, D)), ("model.norm.weight", (D,)), ("lm_head.weight", (V, D))]
    for i in range(L):
        p = "model.layers.%d." % i
        t += [(p + "input_layernorm.weight", (D,)), (p + "post_attention_layernorm.weight", (D,)),
              (p + "self_attn.q_proj.weight", (D, D)), (p + "self_attn.k_proj.weight", (D, D)),
              (p + "self_attn.v_proj.weight", (D, D)), (p + "self_attn.o_proj.weight", (D, D)),
              (p + "mlp.gate_proj.weight", (F, D)), (p + "mlp.up_proj.weight", (F, D)),
              (p + "mlp.down_proj.weight", (D, F))]
    write_shard(os.path.join(out, "model.safetensors"), t, "BF16")
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": D,
           "intermediate_size": F, "max_position_embeddings": 4096, "num_attention_heads": H,
           "num_hidden_layers": L, "num_key_value_heads": H, "rms_norm_eps": 1e-05, "rope_scaling": None,
           "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": V}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    print("done", out)


if __name__ == "__main__":
    main(sys.argv[1])
