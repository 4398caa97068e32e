#!/usr/bin/env python3
"""Writes tests/data/gguf/*.gguf: GGUF files made by llama.cpp's own converter
(convert_hf_to_gguf.py) from stk's small test models, as f32, bf16 and q8_0.

llama.cpp is NOT part of this repository and this script does not build anything: give it a
checkout of llama.cpp (only convert_hf_to_gguf.py, conversion/ and gguf-py/ are used, run with
the repository's venv, which has torch and transformers: scripts/make-venv.sh makes it):

    ~/.cache/stk/venv/bin/python scripts/make_gguf_fixtures.py --llama-cpp /path/to/llama.cpp

The inputs are prepared in a temporary directory first; tests/data/gguf/README.md says exactly
what differs from the committed models and why:
  - tiny-gpt2 (bindings/testdata/tiny-gpt2): its h.N.attn.bias causal-mask buffers are dropped
    (not parameters; this converter revision refuses to map them).  Its vocabulary is GPT-2's
    byte-level BPE scheme with a tiny merge list, which the converter's pre-tokenizer checksum
    does not know: get_vocab_base_pre is made to answer "gpt-2" (what the tokenizer is).
  - llama (tests/data/models/llama_f32, a 2-layer Llama with GQA, f32): it has no tokenizer
    files, so set_vocab is made a no-op: the GGUF holds the weights and the model keys only.
  - qwen2_moe and bloom (tests/data/models/{qwen2_moe,bloom}, f32 only): no tokenizer files
    either; every model class's set_vocab is made a no-op.  They check the expert stacks
    (ffn_*_exps split per expert, the shared expert) and Bloom's fused QKV regrouping.
  - the families llama.cpp converts with changes stk undoes (`--families`: tests/fixtures/families/
    deepseek_v2, deepseek_v3, phimoe, granite, granitemoe, gpt_oss, gpt_oss_mxfp4, internlm2, qwen3,
    qwen3_moe, olmo2, olmoe, gemma, gemma2, stablelm, phi3, cohere,
    arcee, starcoder2, phi, gpt_bigcode, mpt; bf16,
    which is lossless for these bf16 checkpoints): no tokenizer files, so every class's set_vocab
    is made a no-op; phimoe's "architectures" is written "PhiMoEForCausalLM" (the hub model's
    spelling, the one the converter registers; transformers' own is "PhimoeForCausalLM"), mpt's
    "MPTForCausalLM" likewise (transformers writes "MptForCausalLM").  One more
    file is made from the deepseek_v2 one with gguf-py's GGUFWriter: the layout converters wrote
    before llama.cpp's MLA change (April 2025, llama.cpp PR 12801): attn_kv_b whole instead of
    attn_k_b / attn_v_b, head_count_kv = heads, key_length = nope + rope, value_length = v, no
    *_mla keys.  deepseek_v2, granitemoe, gpt_oss and internlm2 are also written as q8_0 (the
    converter keeps a row of 16 in F16: DeepSeek's attn_k_b beside a Q8_0 attn_v_b).
"""
import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "gguf"
TYPES = ["f32", "bf16", "q8_0"]


def prepare_gpt2(tmp: Path) -> Path:
    from safetensors.numpy import load_file, save_file

    src = REPO / "bindings" / "testdata" / "tiny-gpt2"
    dst = tmp / "tiny-gpt2"
    dst.mkdir()
    for f in ("config.json", "vocab.json", "merges.txt"):
        shutil.copy(src / f, dst / f)
    tensors = load_file(str(src / "model.safetensors"))
    tensors = {k: v for k, v in tensors.items() if not k.endswith(".attn.bias")}
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def prepare_plain(tmp: Path, model: str) -> Path:
    src = REPO / "tests" / "data" / "models" / model
    dst = tmp / model
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("expected.json"))
    return dst


def prepare_llama(tmp: Path) -> Path:
    src = REPO / "tests" / "data" / "models" / "llama_f32"
    dst = tmp / "llama"
    dst.mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(src / f, dst / f)
    return dst


# Runs inside a child process: patch the converter, then run it as __main__.
CHILD = r"""
import sys, runpy
llama, kind = sys.argv[1], sys.argv[2]
sys.argv = [llama + "/convert_hf_to_gguf.py"] + sys.argv[3:]
sys.path.insert(0, llama)
import conversion.base as base
if kind == "gpt2":
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
elif kind == "novocab":
    base.TextModel.set_vocab = lambda self: None
    for classes in base.ModelBase._model_classes.values():
        for c in classes.values():
            if "set_vocab" in c.__dict__:
                c.set_vocab = lambda self: None
elif kind == "families":
    import conversion
    get = conversion.get_model_class
    def patched(name, mmproj=False):
        c = get(name, mmproj)
        for k in c.__mro__:
            if "set_vocab" in k.__dict__:
                k.set_vocab = lambda self: None
        return c
    conversion.get_model_class = patched
else:
    import conversion.llama as cl
    cl.LlamaModel.set_vocab = lambda self: None
runpy.run_path(llama + "/convert_hf_to_gguf.py", run_name="__main__")
"""


# Phi-3.5-MoE's long context (its hub config: longrope, 32 long and short factors): the converter
# stores the factors as the tensors rope_factors_long / rope_factors_short.  The same patch is
# applied to the HF fixture by tests/gguf_model_reference.py before the two are compared.
PHIMOE_LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 64,
                   "long_factor": [1.0, 1.1, 1.25, 1.5, 2.0, 3.3, 5.75, 8.0],
                   "short_factor": [1.0, 1.0, 1.05, 1.1, 1.2, 1.3, 1.45, 1.6],
                   "long_mscale": 1.243163121016122, "short_mscale": 1.243163121016122}


def phimoe_longrope(cfg):
    cfg["rope_parameters"] = dict(PHIMOE_LONGROPE)
    cfg["original_max_position_embeddings"] = PHIMOE_LONGROPE["original_max_position_embeddings"]
    return cfg


Q8_FAMILIES = ["deepseek_v2", "granitemoe", "gpt_oss", "internlm2"]
FAMILIES = ["deepseek_v2", "deepseek_v3", "phimoe", "granite", "granitemoe", "gpt_oss", "gpt_oss_mxfp4", "internlm2",
            "qwen3", "qwen3_moe", "olmo2", "olmoe", "gemma", "gemma2", "stablelm", "phi3",
            "cohere", "arcee", "starcoder2", "phi", "gpt_bigcode", "mpt"]


def family_name(model: str) -> str:
    return "tiny-" + model.replace("_", "-") + "-bf16.gguf"


def write_legacy_deepseek(src: Path, out: Path):
    """The deepseek2 layout before llama.cpp's MLA split, from the converter's own file."""
    import numpy as np
    import gguf
    r = gguf.GGUFReader(str(src))
    arch = "deepseek2"
    val = lambda k: r.fields[k].contents()
    heads, kvl = val(f"{arch}.attention.head_count"), val(f"{arch}.attention.kv_lora_rank")
    rope, qk, v = val(f"{arch}.rope.dimension_count"), val(f"{arch}.attention.key_length_mla"), val(f"{arch}.attention.value_length_mla")
    w = gguf.GGUFWriter(str(out), arch)
    override = {f"{arch}.attention.head_count_kv": heads, f"{arch}.attention.key_length": qk,
                f"{arch}.attention.value_length": v}
    skip = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture",
            f"{arch}.attention.key_length_mla", f"{arch}.attention.value_length_mla"}
    for k, f in r.fields.items():
        if k in skip:
            continue
        vt = f.types[0]
        w.add_key_value(k, override.get(k, f.contents()), vt)
    tensors = {t.name: t for t in r.tensors}
    for t in r.tensors:
        if ".attn_v_b." in t.name:
            continue
        data = np.array(t.data)
        if ".attn_k_b." in t.name:
            # Element moves only: bf16 bits as uint16 (the reader hands them over as bytes).
            elems = lambda x: np.array(x.data).view(np.uint16) if x.tensor_type == gguf.GGMLQuantizationType.BF16 else np.array(x.data)
            k_b = elems(t).reshape(heads, kvl, qk - rope)  # [H, kv_lora, nope]
            v_b = elems(tensors[t.name.replace("attn_k_b", "attn_v_b")]).reshape(heads, v, kvl)
            kv_b = np.ascontiguousarray(np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1).reshape(heads * (qk - rope + v), kvl))
            w.add_tensor(t.name.replace("attn_k_b", "attn_kv_b"), kv_b.view(np.uint8) if kv_b.dtype == np.uint16 else kv_b,
                         raw_dtype=t.tensor_type)
            continue
        shape = [int(x) for x in reversed(t.shape.tolist())]
        if data.dtype == np.uint8:  # raw bytes (bf16): the writer takes their byte shape
            shape = list(gguf.quant_shape_to_byte_shape(shape, t.tensor_type))
        w.add_tensor(t.name, data.reshape(shape), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_families(llama: Path, tmp: Path):
    for model in FAMILIES:
        src = prepare_plain_from(tmp, REPO / "tests" / "fixtures" / "families" / model, ("reference.json",))
        if model in ("phimoe", "mpt"):
            cfg = json.loads((src / "config.json").read_text())
            cfg["architectures"] = ["PhiMoEForCausalLM" if model == "phimoe" else "MPTForCausalLM"]
            (src / "config.json").write_text(json.dumps(cfg, indent=2))
        out = OUT / family_name(model)
        subprocess.run([sys.executable, "-c", CHILD, str(llama), "families", str(src), "--outtype", "bf16", "--outfile",
                        str(out)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        size = out.stat().st_size
        assert size <= 1 << 20, f"{out}: {size} bytes, more than 1 MiB"
        print(f"{out.relative_to(REPO)}: {size} bytes")
        if model in Q8_FAMILIES:  # quantised: the gathers on ggml blocks, and DeepSeek's F16 k_b beside a Q8_0 v_b
            q8 = OUT / family_name(model).replace("-bf16", "-q8_0")
            subprocess.run([sys.executable, "-c", CHILD, str(llama), "families", str(src), "--outtype", "q8_0", "--outfile",
                            str(q8)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"{q8.relative_to(REPO)}: {q8.stat().st_size} bytes")
    src = tmp / "phimoe-longrope"
    shutil.copytree(REPO / "tests" / "fixtures" / "families" / "phimoe", src, ignore=shutil.ignore_patterns("reference.json"))
    cfg = phimoe_longrope(json.loads((src / "config.json").read_text()))
    cfg["architectures"] = ["PhiMoEForCausalLM"]
    (src / "config.json").write_text(json.dumps(cfg, indent=2))
    out = OUT / "tiny-phimoe-longrope-bf16.gguf"
    subprocess.run([sys.executable, "-c", CHILD, str(llama), "families", str(src), "--outtype", "bf16", "--outfile", str(out)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"{out.relative_to(REPO)}: {out.stat().st_size} bytes")
    legacy = OUT / "tiny-deepseek-v2-kv-b-bf16.gguf"
    write_legacy_deepseek(OUT / family_name("deepseek_v2"), legacy)
    print(f"{legacy.relative_to(REPO)}: {legacy.stat().st_size} bytes")


def prepare_plain_from(tmp: Path, src: Path, drop) -> Path:
    dst = tmp / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*drop))
    return dst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="a llama.cpp checkout (convert_hf_to_gguf.py, conversion/, gguf-py/)")
    ap.add_argument("--families", action="store_true", help="only the family fixtures (tiny-<family>-bf16.gguf)")
    args = ap.parse_args()
    llama = Path(args.llama_cpp).resolve()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.families:
        with tempfile.TemporaryDirectory() as t:
            make_families(llama, Path(t))
        return
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for kind, model_dir in (("gpt2", prepare_gpt2(tmp)), ("llama", prepare_llama(tmp))):
            name = "tiny-gpt2" if kind == "gpt2" else "tiny-llama"
            for ty in TYPES:
                out = OUT / f"{name}-{ty}.gguf"
                subprocess.run([sys.executable, "-c", CHILD, str(llama), kind, str(model_dir), "--outtype", ty,
                                "--outfile", str(out)], check=True, stdout=subprocess.DEVNULL)
                size = out.stat().st_size
                assert size <= 1 << 20, f"{out}: {size} bytes, more than 1 MiB"
                print(f"{out.relative_to(REPO)}: {size} bytes")
        for model in ("qwen2_moe", "bloom"):
            out = OUT / f"tiny-{model.replace('_', '-')}-f32.gguf"
            subprocess.run([sys.executable, "-c", CHILD, str(llama), "novocab", str(prepare_plain(tmp, model)), "--outtype",
                            "f32", "--outfile", str(out)], check=True, stdout=subprocess.DEVNULL)
            print(f"{out.relative_to(REPO)}: {out.stat().st_size} bytes")
        make_families(llama, tmp)


if __name__ == "__main__":
    main()
