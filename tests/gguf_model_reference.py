#!/usr/bin/env python3
"""A GGUF read as HF tensors by stk (tests/gguf_model_dump) against the references:

  - gguf-py's own reading of the same file (GGUFReader + gguf.quants.dequantize), with what
    llama.cpp's convert_hf_to_gguf.py did undone here, written from the converter's code
    (conversion/gpt2.py transposes the Conv1D weights; LlamaModel.permute interleaves the Q/K rows
    of each head; Gemma3Model adds 1 to every *norm.weight): every tensor's f32 values must be
    bit-identical, under the same HF names;
  - for the f32 GGUFs, the HF checkpoint they were converted from (safetensors), bit for bit,
    and the model description stk gives the HF directory (config and parameter count).

    gguf_model_reference.py DUMP REPO             the fixtures of tests/data/gguf
    gguf_model_reference.py DUMP REPO --real DIR  the real models fetch-real-models.sh put in DIR
"""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

LLAMA_LAYER = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
GEMMA3_LAYER = dict(LLAMA_LAYER, ffn_norm="pre_feedforward_layernorm", post_attention_norm="post_attention_layernorm",
                    post_ffw_norm="post_feedforward_layernorm", attn_q_norm="self_attn.q_norm",
                    attn_k_norm="self_attn.k_norm")
GPT2_LAYER = {"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_norm": "ln_2",
              "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
GLOBAL = {
    "llama": {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"},
    "gemma3": {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"},
    "gpt2": {"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "output": "lm_head"},
}
LAYER = {"llama": ("model.layers.{}.", LLAMA_LAYER), "gemma3": ("model.layers.{}.", GEMMA3_LAYER),
         "gpt2": ("h.{}.", GPT2_LAYER)}


def field(r, key):
    f = r.fields[key]
    v = f.parts[f.data[0]]
    return bytes(v).decode() if f.types[0].name == "STRING" else v[0]


def expected(path):
    """{hf name: f32 array} from gguf-py, the converter's changes undone."""
    r = GGUFReader(str(path))
    arch = field(r, "general.architecture")
    heads = int(field(r, f"{arch}.attention.head_count"))
    kv_key = f"{arch}.attention.head_count_kv"
    kv = int(field(r, kv_key)) if kv_key in r.fields else heads
    out = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]
        a = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        stem, suffix = t.name.rsplit(".", 1)
        if stem.startswith("blk."):
            _, layer, part = stem.split(".", 2)
            prefix, table = LAYER[arch]
            hf = prefix.format(layer) + table[part]
            if arch == "gpt2" and suffix == "weight" and part in ("attn_qkv", "attn_output", "ffn_up", "ffn_down"):
                a = np.ascontiguousarray(a.T)
            if arch == "llama" and suffix == "weight" and part in ("attn_q", "attn_k"):
                n = heads if part == "attn_q" else kv
                a = a.reshape(n, a.shape[0] // n // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
        else:
            hf = GLOBAL[arch][stem]
        if arch == "gemma3" and suffix == "weight" and stem.endswith("norm"):
            a = a - np.float32(1)
        out[hf + "." + suffix] = np.ascontiguousarray(a, dtype=np.float32)
    return out


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def dump(tool, model):
    p = subprocess.run([tool, str(model)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: gguf_model_dump {model}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def compare(tool, gguf):
    got = dump(tool, gguf)
    want = expected(gguf)
    names = {t["name"] for t in got["tensors"]}
    if names != set(want):
        sys.exit(f"FAIL: {gguf.name}: names differ: stk only {sorted(names - set(want))[:5]}, "
                 f"gguf-py only {sorted(set(want) - names)[:5]}")
    for t in got["tensors"]:
        w = want[t["name"]]
        if list(w.shape) != t["shape"] or sha(w) != t["sha256"]:
            sys.exit(f"FAIL: {gguf.name}: {t['name']}: stk shape {t['shape']} sha {t['sha256'][:16]}, "
                     f"gguf-py shape {list(w.shape)} sha {sha(w)[:16]}")
    print(f"ok {gguf.name}: {len(names)} tensors equal to gguf-py's, HF names and layouts")
    return got


def same_tensors(got, want, what, against):
    """Every tensor of dump `got` equals `want`'s (names, shapes, SHA-256); returns the count."""
    g, w = {t["name"]: t for t in got["tensors"]}, {t["name"]: t for t in want["tensors"]}
    if set(g) != set(w):
        sys.exit(f"FAIL: {what}: names differ: {sorted(set(g) ^ set(w))[:6]}")
    bad = [n for n in g if g[n]["sha256"] != w[n]["sha256"] or g[n]["shape"] != w[n]["shape"]]
    if bad:
        sys.exit(f"FAIL: {what}: {len(bad)} tensors differ from {against}, e.g. {bad[:3]}")
    return len(g)


def main():
    tool, repo = sys.argv[1], Path(sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[3] == "--real":
        cache = Path(sys.argv[4])
        for f in ("smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3-270m/gemma-3-270m-q4_k_m.gguf"):
            compare(tool, cache / f)
        return
    from safetensors.numpy import load_file
    sources = {"tiny-gpt2": repo / "bindings/testdata/tiny-gpt2", "tiny-llama": repo / "tests/data/models/llama_f32"}
    for name, hf_dir in sources.items():
        hf_desc = dump(tool, hf_dir)
        # The buffers the converter drops (GPT-2's causal masks, Llama's rotary inv_freq): not parameters.
        hf = {k: v for k, v in load_file(str(hf_dir / "model.safetensors")).items()
              if not k.endswith((".attn.bias", ".rotary_emb.inv_freq"))}
        for ty in ("f32", "bf16", "q8_0"):
            got = compare(tool, repo / "tests/data/gguf" / f"{name}-{ty}.gguf")
            cfg = dict(got["config"])
            if cfg != hf_desc["config"]:
                sys.exit(f"FAIL: {name}-{ty}.gguf: config {cfg} != the HF directory's {hf_desc['config']}")
            if ty != "f32":
                continue
            for t in got["tensors"]:
                if t["name"] not in hf or sha(hf[t["name"]]) != t["sha256"]:
                    sys.exit(f"FAIL: {name}-f32.gguf: {t['name']} differs from the HF safetensors")
            if len(got["tensors"]) != len(hf):
                sys.exit(f"FAIL: {name}-f32.gguf: {len(got['tensors'])} tensors, the HF checkpoint {len(hf)}")
            print(f"ok {name}-f32.gguf: every tensor bit-identical to {hf_dir.name}/model.safetensors; same config")
    # Families whose GGUF layout differs most from HF's (expert stacks, the shared-expert gate's
    # shape, Bloom's regrouped fused QKV): against the HF directory as stk reads it (its
    # safetensors reader is itself checked against safetensors), config and every tensor.
    for name, model in (("tiny-qwen2-moe-f32.gguf", "qwen2_moe"), ("tiny-bloom-f32.gguf", "bloom")):
        got, want = dump(tool, repo / "tests/data/gguf" / name), dump(tool, repo / "tests/data/models" / model)
        if got["config"] != want["config"]:
            sys.exit(f"FAIL: {name}: config {got['config']} != {want['config']}")
        if model == "bloom":
            # The GGUF reads under transformers 5's names (transformer.h.N...); this checkpoint has
            # the hub's older bare ones (h.N...): the same tensors with the prefix dropped.
            if not all(t["name"].startswith(("transformer.", "lm_head.")) for t in got["tensors"]):
                sys.exit(f"FAIL: {name}: names without transformer.: {[t['name'] for t in got['tensors']][:4]}")
            for t in got["tensors"]:
                t["name"] = t["name"].removeprefix("transformer.")
        n = same_tensors(got, want, name, "the HF directory's")
        print(f"ok {name}: {n} tensors bit-identical to tests/data/models/{model}; same config")
    families(tool, repo)


# The family GGUFs (scripts/make_gguf_fixtures.py --families: llama.cpp's converter, bf16, from the
# transformers-written fixtures) against the HF directory each came from: config, the rest of the
# model description (MLA dims, routing, multipliers, sinks, RoPE scaling), the approximations,
# the plan's roles, and every tensor bit for bit.  What a GGUF cannot carry is listed and checked
# to be exactly that: gpt-oss's swiglu_limit (no key: llama.cpp and stk take 7; the fixture's is
# 0.5) and PhiMoE's router_jitter_noise (no key: 0; the sparsemixer is recorded as approximated
# either way).
FAMILY_GGUFS = [("tiny-deepseek-v2-bf16.gguf", "deepseek_v2"), ("tiny-deepseek-v2-kv-b-bf16.gguf", "deepseek_v2"),
                ("tiny-deepseek-v3-bf16.gguf", "deepseek_v3"), ("tiny-phimoe-bf16.gguf", "phimoe"),
                ("tiny-granite-bf16.gguf", "granite"), ("tiny-granitemoe-bf16.gguf", "granitemoe"),
                ("tiny-gpt-oss-bf16.gguf", "gpt_oss"), ("tiny-gpt-oss-mxfp4-bf16.gguf", "gpt_oss_mxfp4"),
                ("tiny-internlm2-bf16.gguf", "internlm2"), ("tiny-qwen3-bf16.gguf", "qwen3"),
                ("tiny-qwen3-moe-bf16.gguf", "qwen3_moe"), ("tiny-olmo2-bf16.gguf", "olmo2"), ("tiny-olmoe-bf16.gguf", "olmoe"),
                ("tiny-gemma-bf16.gguf", "gemma"), ("tiny-gemma2-bf16.gguf", "gemma2"), ("tiny-stablelm-bf16.gguf", "stablelm"),
                ("tiny-phi3-bf16.gguf", "phi3"), ("tiny-cohere-bf16.gguf", "cohere"), ("tiny-arcee-bf16.gguf", "arcee"),
                ("tiny-starcoder2-bf16.gguf", "starcoder2"), ("tiny-phi-bf16.gguf", "phi"),
                ("tiny-gpt-bigcode-bf16.gguf", "gpt_bigcode"), ("tiny-mpt-bf16.gguf", "mpt")]


def families(tool, repo):
    import shutil
    import tempfile
    # Phi-3.5-MoE's longrope: the HF side is the phimoe fixture with the config patch the
    # generator applied before converting (its factors come back from rope_factors_long / _short).
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(repo / "scripts"))
    from make_gguf_fixtures import phimoe_longrope
    tmp = tempfile.TemporaryDirectory()
    longrope = Path(tmp.name) / "phimoe-longrope"
    shutil.copytree(repo / "tests/fixtures/families/phimoe", longrope)
    cfg = json.loads((longrope / "config.json").read_text())
    (longrope / "config.json").write_text(json.dumps(phimoe_longrope(cfg)))
    for name, model in FAMILY_GGUFS + [("tiny-phimoe-longrope-bf16.gguf", longrope)]:
        hf_dir = model if isinstance(model, Path) else repo / "tests/fixtures/families" / model
        model = "phimoe" if isinstance(model, Path) else model
        got, want = dump(tool, repo / "tests/data/gguf" / name), dump(tool, hf_dir)
        if model == "starcoder2":
            # The fixture's rope_theta is not an f32 (the converter stores the nearest one).
            gt, wt = got["config"]["rope_theta"], want["config"]["rope_theta"]
            if gt == wt or np.float32(gt) != np.float32(wt):
                sys.exit(f"FAIL: {name}: rope_theta {gt}, not the f32 nearest the HF {wt}")
            got["config"]["rope_theta"] = wt
        if got["config"] != want["config"]:
            sys.exit(f"FAIL: {name}: config {got['config']} != {want['config']}")
        gm, wm = dict(got["model"]), dict(want["model"])
        if model.startswith("gpt_oss"):
            if gm["swiglu"] != [7, 1] or wm["swiglu"] != [0.5, 1]:
                sys.exit(f"FAIL: {name}: swiglu {gm['swiglu']} (want llama.cpp's 7), HF {wm['swiglu']}")
            gm["swiglu"] = wm["swiglu"]
            gm["approximations"] = [a.replace("clamped at 7 ", "clamped at 0.5 ") for a in gm["approximations"]]
            if not any("sink logit" in a for a in gm["approximations"]):
                sys.exit(f"FAIL: {name}: no attention-sinks approximation in {gm['approximations']}")
        if model == "phimoe":
            if gm["experts"][-1] != 0 or wm["experts"][-1] != 0.01:
                sys.exit(f"FAIL: {name}: router jitter {gm['experts'][-1]} / {wm['experts'][-1]}")
            gm["experts"][-1] = wm["experts"][-1]
        if model.startswith("deepseek") and not any(a.startswith("approx: MLA latent RMSNorm") for a in gm["approximations"]):
            sys.exit(f"FAIL: {name}: no MLA latent RMSNorm approximation in {gm['approximations']}")
        if model == "starcoder2":
            # No key records StarCoder2's sliding window (llama.cpp attends to every position): the
            # GGUF reads as no window, and without the HF side's full-attention approximation.
            extra = [a for a in wm["approximations"] if a not in gm["approximations"]]
            if gm["sliding_window"] != 0 or wm["sliding_window"] != 4 or len(extra) != 1 or "sliding" not in extra[0].lower():
                sys.exit(f"FAIL: {name}: sliding window {gm['sliding_window']} / {wm['sliding_window']}, {extra}")
            gm["sliding_window"], gm["approximations"] = wm["sliding_window"], wm["approximations"]
        gm["roles"] = [r for r in gm["roles"] if not r[7]]
        wm["roles"] = [r for r in wm["roles"] if not r[7]]
        for k in wm:
            if gm[k] != wm[k]:
                sys.exit(f"FAIL: {name}: {k}: GGUF {gm[k]}, HF {wm[k]}")
        n_tensors = same_tensors(got, want, name, "the HF directory's")
        if name == "tiny-phimoe-longrope-bf16.gguf" and (gm["rope_scaling"] != "longrope" or len(gm["rope_long_factor"]) != 8):
            sys.exit(f"FAIL: {name}: rope scaling {gm['rope_scaling']!r}, not longrope")
        print(f"ok {name}: {n_tensors} tensors bit-identical to {hf_dir.name}; same config, "
              f"{len(gm['roles'])} roles, approximations {len(gm['approximations'])}")
    tmp.cleanup()
    quantised(tool, repo)
    hostile(tool, repo)


def rewrite_dequantised(src, dst, only=None):
    """src again with gguf-py's dequantisation of the tensors in `only` (all: None) stored as F32."""
    import gguf
    r = GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), field(r, "general.architecture"))
    for k, f in r.fields.items():
        if not k.startswith("GGUF.") and k != "general.architecture":
            w.add_key_value(k, f.contents(), f.types[0])
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]
        if only is None or t.name in only:
            w.add_tensor(t.name, dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape))
            continue
        data = np.array(t.data)
        if data.dtype == np.uint8:
            shape = list(gguf.quant_shape_to_byte_shape(shape, t.tensor_type))
        w.add_tensor(t.name, data.reshape(shape), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def same_read(tool, a, b, what):
    ga, gb = dump(tool, a), dump(tool, b)
    if ga["config"] != gb["config"]:
        sys.exit(f"FAIL: {what}: config differs from the dequantised file's")
    return same_tensors(ga, gb, what, "gguf-py's dequantisation")


# Quantised family GGUFs (the converter's q8_0): what stk reads, gathers included (DeepSeek's F16
# k_b with a Q8_0 v_b, gpt-oss's transposes, InternLM2's and GraniteMoE's row gathers on Q8_0
# blocks), equals what it reads from the same file with every tensor replaced by gguf-py's
# dequantisation in F32 (whose gathers the bf16 comparison above checked against transformers),
# bit for bit; and an InternLM2 whose q / k / v differ in type (quantisers mix them) likewise.
def quantised(tool, repo):
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        for model in ("deepseek-v2", "granitemoe", "gpt-oss", "internlm2"):
            q = repo / "tests/data/gguf" / f"tiny-{model}-q8_0.gguf"
            d = Path(t) / f"{model}-deq.gguf"
            rewrite_dequantised(q, d)
            n = same_read(tool, q, d, q.name)
            print(f"ok {q.name}: {n} tensors equal to stk's reading of gguf-py's dequantisation (F32)")
            if model == "internlm2":
                m = Path(t) / "internlm2-mixed.gguf"
                rewrite_dequantised(q, m, {"blk.0.attn_v.weight", "blk.1.attn_k.weight"})
                n = same_read(tool, m, d, "internlm2 with F32 and Q8_0 parts of one wqkv")
                print(f"ok internlm2, q / k / v of two types: {n} tensors equal to the dequantised file's")


def rewrite(src, dst, drop=(), reshape=None):
    """src again with GGUFWriter, without the tensors in `drop` (reshape: {name: new shape})."""
    import gguf
    r = GGUFReader(str(src))
    arch = field(r, "general.architecture")
    w = gguf.GGUFWriter(str(dst), arch)
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        w.add_key_value(k, f.contents(), f.types[0])
    for t in r.tensors:
        if t.name in drop:
            continue
        shape = [int(x) for x in reversed(t.shape.tolist())]
        if reshape and t.name in reshape:
            shape = reshape[t.name]
        data = np.array(t.data)
        if data.dtype == np.uint8:
            shape = list(gguf.quant_shape_to_byte_shape(shape, t.tensor_type))
        w.add_tensor(t.name, data.reshape(shape), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def refused(tool, path, want):
    p = subprocess.run([tool, str(path)], capture_output=True, text=True)
    if p.returncode == 0 or want not in p.stderr:
        sys.exit(f"FAIL: {path.name}: want a refusal containing {want!r}, got rc {p.returncode}: {p.stderr.strip()}")
    print(f"ok refused {path.name}: {p.stderr.strip()[:160]}")


def hostile(tool, repo):
    import tempfile
    src = repo / "tests/data/gguf/tiny-deepseek-v2-bf16.gguf"
    with tempfile.TemporaryDirectory() as t:
        a = Path(t) / "no-v-b.gguf"
        rewrite(src, a, drop={"blk.1.attn_v_b.weight"})
        refused(tool, a, "GGUF tensor 'blk.1.attn_k_b.weight' (offset ")
        refused(tool, a, "needs its attn_v_b.weight from the same block too")
        b = Path(t) / "k-b-shape.gguf"
        rewrite(src, b, reshape={"blk.0.attn_k_b.weight": [4, 16, 32]})
        refused(tool, b, "GGUF tensor 'blk.0.attn_k_b.weight'")
        refused(tool, b, "not [heads, kv_lora_rank, qk_nope_head_dim] = [4, 32, 16]")
        c = Path(t) / "granitemoe-no-up.gguf"
        rewrite(repo / "tests/data/gguf/tiny-granitemoe-bf16.gguf", c, drop={"blk.0.ffn_up_exps.weight"})
        refused(tool, c, "needs its ffn_up_exps.weight from the same block too")


if __name__ == "__main__":
    main()
