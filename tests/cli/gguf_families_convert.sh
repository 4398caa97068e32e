#!/bin/sh
# meson test "gguf-families-convert": each family GGUF that llama.cpp's converter wrote from a
# transformers fixture (tests/data/gguf/tiny-<family>-bf16.gguf, scripts/make_gguf_fixtures.py
# --families) converted whole by `stk convert`, checked by `stk check`, and compared with the
# conversion of the HF directory it came from: every array file byte-identical, the same
# approximations recorded (gpt-oss: the GGUF has no swiglu_limit key; stk records llama.cpp's 7;
# starcoder2: no key records its sliding window, so the GGUF has no window to approximate).
# Usage: gguf_families_convert.sh STK REPO
set -eu
stk=$1
repo=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stk-gguf-families.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Phi-3.5-MoE's longrope: the phimoe fixture with the config patch the generator applied.
cp -r "$repo/tests/fixtures/families/phimoe" "$tmp/phimoe_longrope"
python3 - "$repo" "$tmp/phimoe_longrope/config.json" <<'PY'
import json, sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1] + "/scripts")
from make_gguf_fixtures import phimoe_longrope
cfg = json.load(open(sys.argv[2]))
json.dump(phimoe_longrope(cfg), open(sys.argv[2], "w"))
PY
# StarCoder2's fixture has a rope_theta that is no f32: the HF side with the converter's f32 (as
# its shortest decimal, what stk reads back from the GGUF); everything else as committed.
cp -r "$repo/tests/fixtures/families/starcoder2" "$tmp/starcoder2_f32_theta"
python3 - "$tmp/starcoder2_f32_theta/config.json" <<'PY'
import json, struct, sys
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
cfg = json.load(open(sys.argv[1]))
t = f32(cfg["rope_parameters"]["rope_theta"])
cfg["rope_parameters"]["rope_theta"] = next(float(s) for s in ("%.*g" % (d, t) for d in range(1, 18)) if f32(float(s)) == t)
json.dump(cfg, open(sys.argv[1], "w"))
PY
n=0
for pair in deepseek-v2:deepseek_v2 deepseek-v2-kv-b:deepseek_v2 deepseek-v3:deepseek_v3 phimoe:phimoe granite:granite \
            granitemoe:granitemoe gpt-oss:gpt_oss gpt-oss-mxfp4:gpt_oss_mxfp4 internlm2:internlm2 phimoe-longrope:phimoe_longrope \
            qwen3:qwen3 qwen3-moe:qwen3_moe olmo2:olmo2 olmoe:olmoe gemma:gemma gemma2:gemma2 stablelm:stablelm phi3:phi3 \
            cohere:cohere arcee:arcee starcoder2:starcoder2_f32_theta phi:phi gpt-bigcode:gpt_bigcode mpt:mpt; do
  g=${pair%%:*}
  m=${pair#*:}
  gguf="$repo/tests/data/gguf/tiny-$g-bf16.gguf"
  for side in gguf hf; do
    if [ $side = gguf ]; then in=$gguf; elif [ -d "$tmp/$m" ]; then in="$tmp/$m"; else in="$repo/tests/fixtures/families/$m"; fi
    "$stk" convert --in "$in" --out "$tmp/$g.$side" --json >"$tmp/$g.$side.json" 2>"$tmp/$g.$side.err" ||
      { echo "$g ($side): convert failed"; cat "$tmp/$g.$side.json" "$tmp/$g.$side.err"; exit 1; }
  done
  "$stk" check --out "$tmp/$g.gguf" >"$tmp/$g.chk" 2>&1 || { echo "$g: check failed"; cat "$tmp/$g.chk"; exit 1; }
  python3 - "$tmp/$g" "$g" <<'PY'
import glob, json, os, sys
base, name = sys.argv[1], sys.argv[2]
out = {s: json.load(open(f"{base}.{s}.json")) for s in ("gguf", "hf")}
for s, d in out.items():
    bad = [x["stage"] for x in d["stages"] if x["status"] != "ok"]
    assert d["published"] and not bad and len(d["stages"]) == 10, (name, s, bad, d["message"])
ga, ha = out["gguf"]["approximations"], out["hf"]["approximations"]
if name.startswith("gpt-oss"):
    assert any("SwiGLU clamped at 7 " in a for a in ga) and any("sink logit" in a for a in ga), ga
    ga = [a for a in ga if "SwiGLU" not in a]
    ha = [a for a in ha if "SwiGLU" not in a]
if name.startswith("deepseek"):
    assert any(a.startswith("MLA latent RMSNorm") for a in ga), ga
if name == "starcoder2":  # no key records its sliding window: the GGUF has none to approximate
    ha = [a for a in ha if "sliding" not in a.lower()]
assert ga == ha, (name, ga, ha)
arrays = lambda s: sorted(glob.glob(f"{base}.{s}/generations/*/arrays/*"))
g, h = arrays("gguf"), arrays("hf")
assert [os.path.basename(x) for x in g] == [os.path.basename(x) for x in h] and len(g) >= 15, (name, g, h)
diff = [os.path.basename(a) for a, b in zip(g, h) if open(a, "rb").read() != open(b, "rb").read()]
assert not diff, (name, "arrays differ from the HF directory's conversion:", diff)
print(f"ok: {name}: published, checked, {len(g)} arrays byte-identical to the HF directory's")
PY
  n=$((n + 1))
done
[ "$n" -eq 24 ] || { echo "only $n GGUF family fixtures"; exit 1; }
