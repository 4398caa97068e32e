#!/usr/bin/env python3
"""GGUFs llama.cpp's converter wrote from transformers' own checkpoints (tests/fixtures/outside,
tests/fixtures/outside/generate.py), as issue 32 found them from outside, against the HF
directories they came from:

  - GPT-2 with n_inner != 4 x n_embd and Falcon with ffn_hidden_size != 4 x hidden: the
    converter writes feed_forward_length = 4 x hidden whatever the model has; the FFN width
    comes from the tensors' shapes;
  - GPT-2 as converters before mid-2025 wrote it, BLOOM as BloomModel writes it and MPT as its
    first script wrote it, output.weight a copy of token_embd.weight: the tied head
    (tied_lm_head true, no lm_head.weight), as the tied HF checkpoints;
  - BLOOM as transformers 5 writes it (transformer.h.N...): the GGUF reads under the same names;
  - DeepSeek-V3 from a converter before the expert-group keys: one group, as llama.cpp runs it.

Each pair: the same config and model description (tests/gguf_model_dump), every tensor under the
same HF name bit for bit, and `stk export --dtype float32` of the GGUF and of the HF directory
byte-identical (docs/format.md: "a lossless GGUF and its HF source give byte-identical .lwt
exports").

    gguf_outside.py STK DUMP REPO
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_model_reference import dump, field, same_tensors  # noqa: E402


def export(stk, model, out):
    p = subprocess.run([stk, "export", "--in", str(model), "--out", str(out), "--dtype", "float32"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: stk export {model}: rc {p.returncode}: {p.stderr.strip()}")
    return out.read_bytes()


def lwt_header(b):
    n = int.from_bytes(b[8:16], "little")
    return json.loads(b[16:16 + n])


def bare(d):
    """GPT-2's names without transformer. (a GGUF reads under openai-community/gpt2's bare names;
    transformers 5 writes the prefix; the .lwt has seed 001's transformer.* names either way)."""
    for t in d["tensors"]:
        t["name"] = t["name"].removeprefix("transformer.")
    for r in d["model"]["roles"]:
        r[0] = r[0].removeprefix("transformer.")
    return d


def same_model(stk, tool, gguf, hf, tmp, what):
    got, want = dump(tool, gguf), dump(tool, hf)
    if got["config"]["model_type"] == "gpt2":
        got, want = bare(got), bare(want)
    if got["config"] != want["config"]:
        sys.exit(f"FAIL: {what}: config {got['config']} != the HF directory's {want['config']}")
    gm, wm = got["model"], want["model"]
    for k in wm:
        if gm[k] != wm[k]:
            sys.exit(f"FAIL: {what}: {k}: GGUF {gm[k]}, HF {wm[k]}")
    n = same_tensors(got, want, what, "the HF directory's")
    a = export(stk, gguf, tmp / (gguf.name + ".lwt"))
    b = export(stk, hf, tmp / (f"{gguf.name}.{hf.name}.hf.lwt"))
    if a != b:
        sys.exit(f"FAIL: {what}: the .lwt exports differ: GGUF {lwt_header(a)}, HF {lwt_header(b)}")
    print(f"ok {what}: same config, {n} tensors bit for bit, .lwt exports byte-identical ({len(a)} bytes)")
    return got, lwt_header(a)


def rewrite_without(src, dst, keys):
    """src again with gguf-py's GGUFWriter, without the metadata keys `keys`."""
    import gguf
    import numpy as np
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), field(r, "general.architecture"))
    for k, f in r.fields.items():
        if not k.startswith("GGUF.") and k != "general.architecture" and k not in keys:
            w.add_key_value(k, f.contents(), f.types[0])
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]
        data = np.array(t.data)
        if data.dtype == np.uint8:
            shape = list(gguf.quant_shape_to_byte_shape(shape, t.tensor_type))
        w.add_tensor(t.name, data.reshape(shape), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    stk, tool, repo = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    ggufs, fixtures = repo / "tests/data/gguf", repo / "tests/fixtures/outside"
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        # The FFN width from the tensors (the key says 4 x hidden).
        got, h = same_model(stk, tool, ggufs / "tiny-gpt2-ninner-bf16.gguf", fixtures / "gpt2_ninner", tmp, "gpt2 n_inner 64")
        if got["config"]["ffn_dim"] != 64 or not h["tied_lm_head"]:
            sys.exit(f"FAIL: gpt2 n_inner: ffn_dim {got['config']['ffn_dim']}, tied_lm_head {h['tied_lm_head']}")
        got, _ = same_model(stk, tool, ggufs / "tiny-falcon-ffn-bf16.gguf", fixtures / "falcon_ffn", tmp,
                            "falcon ffn_hidden_size 128")
        if got["config"]["ffn_dim"] != 128:
            sys.exit(f"FAIL: falcon ffn_hidden_size: ffn_dim {got['config']['ffn_dim']}")
        # GPT-2's head stored again as a copy of the embedding: tied, not a second matrix.
        got, h = same_model(stk, tool, ggufs / "tiny-gpt2-ninner-head-bf16.gguf", fixtures / "gpt2_ninner", tmp,
                            "gpt2 with output.weight = token_embd.weight")
        if not h["tied_lm_head"] or any(x["name"] == "lm_head.weight" for x in got["tensors"]):
            sys.exit(f"FAIL: gpt2 head copy: tied_lm_head {h['tied_lm_head']}")
        # The same copy where BloomModel writes it (no lm_head.weight in the checkpoint: BLOOM ties)
        # and where the first MPT script wrote it: tied in every family, never an lm_head.weight.
        for name, hf, what in (("tiny-bloom-head-bf16.gguf", fixtures / "bloom", "bloom"),
                               ("tiny-mpt-head-bf16.gguf", repo / "tests/fixtures/families/mpt", "mpt")):
            import gguf
            import numpy as np
            t = {x.name: x for x in gguf.GGUFReader(str(ggufs / name)).tensors}
            if "output.weight" not in t or not np.array_equal(np.array(t["output.weight"].data),
                                                               np.array(t["token_embd.weight"].data)):
                sys.exit(f"FAIL: {name} does not hold output.weight = token_embd.weight (gguf-py)")
            got, h = same_model(stk, tool, ggufs / name, hf, tmp, what + " with output.weight = token_embd.weight")
            if not h["tied_lm_head"] or any(x["name"] == "lm_head.weight" for x in got["tensors"]):
                sys.exit(f"FAIL: {what} head copy: tied_lm_head {h['tied_lm_head']}, "
                         f"{sum(x['name'] == 'lm_head.weight' for x in got['tensors'])} lm_head.weight")
            if got["config"]["tied"] is not True:
                sys.exit(f"FAIL: {what} head copy: the config is not tied: {got['config']}")
        # BLOOM under transformers 5's names, both ways; the hub's bare names still read.
        got, _ = same_model(stk, tool, ggufs / "tiny-bloom-bf16.gguf", fixtures / "bloom", tmp, "bloom (transformers 5 names)")
        bare = [x["name"] for x in got["tensors"] if not x["name"].startswith(("transformer.", "lm_head"))]
        if bare:
            sys.exit(f"FAIL: bloom GGUF names without transformer.: {bare[:3]}")
        legacy = dump(tool, repo / "tests/data/models/bloom")
        if not any(x["name"].startswith("h.0.") for x in legacy["tensors"]) or legacy["config"]["n_layers"] != 2:
            sys.exit("FAIL: the bare-named BLOOM checkpoint (tests/data/models/bloom) no longer reads as before")
        print(f"ok bloom: bare h.N names read too ({len(legacy['tensors'])} tensors)")
        # DeepSeek-V3 without expert_group_count / expert_group_used_count: one group.
        src = ggufs / "tiny-deepseek-v3-bf16.gguf"
        nogroup = tmp / "deepseek-v3-no-groups.gguf"
        rewrite_without(src, nogroup, {"deepseek2.expert_group_count", "deepseek2.expert_group_used_count"})
        hf = tmp / "deepseek_v3_one_group"
        shutil.copytree(repo / "tests/fixtures/families/deepseek_v3", hf)
        cfg = json.loads((hf / "config.json").read_text())
        cfg["n_group"], cfg["topk_group"] = 1, 1
        (hf / "config.json").write_text(json.dumps(cfg))
        got, _ = same_model(stk, tool, nogroup, hf, tmp, "deepseek-v3 without the group keys")
        if got["model"]["experts"][9:11] != [1, 1]:
            sys.exit(f"FAIL: deepseek-v3 without groups: n_group / topk_group {got['model']['experts'][9:11]}")


if __name__ == "__main__":
    main()
