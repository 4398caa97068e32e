#!/usr/bin/env python3
"""Writes tests/data/gguf/*.gguf: GGUF files made by llama.cpp's own converter
(convert_hf_to_gguf.py) from stk's small test models, as f32, bf16 and q8_0.

llama.cpp is NOT part of this repository and this script does not build anything: give it a
checkout of llama.cpp (only convert_hf_to_gguf.py, conversion/ and gguf-py/ are used, run with
the dev venv's Python, which has torch and transformers):

    /work/venv/bin/python scripts/make_gguf_fixtures.py --llama-cpp /path/to/llama.cpp

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
else:
    import conversion.llama as cl
    cl.LlamaModel.set_vocab = lambda self: None
runpy.run_path(llama + "/convert_hf_to_gguf.py", run_name="__main__")
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="a llama.cpp checkout (convert_hf_to_gguf.py, conversion/, gguf-py/)")
    args = ap.parse_args()
    llama = Path(args.llama_cpp).resolve()
    OUT.mkdir(parents=True, exist_ok=True)
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


if __name__ == "__main__":
    main()
