"""Conformance of the faithful profile's block-scaled FFN weights against transformers (issue 37).

A family fixture converted with `stk convert --profile faithful --ffn q8_0|q4_0` is run by the
library (stk.lm on the generation: the FFN matrices mapped as ggml blocks, attention and
embeddings bf16 as converted) at full context (0 sinks + a window of the whole context), and
compared with transformers' float32 eager forward of the same checkpoint whose FFN matrices
(gate, up, down of every layer) were replaced by gguf-py's dequantize(quantize(W)) of the same
type: the field's own rule for those blocks.  The fixtures' checkpoints are bf16, so every other
matrix is the generation's value exactly.  What is left is the order of f32 sums (the library
dots each block's integer codes with x and scales once per block): the bound below, printed with
the measured max |dlogit|; top-1 equal at every position.  And the block type's own error (the
same comparison against the unquantised FFN) is far above that bound, so the test sees the
blocks.
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
from gguf import quants  # noqa: E402

from stk.lm import LanguageModel  # noqa: E402
from conftest import SOURCE_ROOT  # noqa: E402

STK = os.environ.get("STK_BIN", str(SOURCE_ROOT / "build-test" / "src" / "cli" / "stk"))
MODELS = Path(os.environ.get("STK_TEST_DATA", SOURCE_ROOT / "tests" / "data")) / "models"
FAMILIES = SOURCE_ROOT / "tests" / "fixtures" / "families"
CTX = 40
BOUND = 2e-5  # max |dlogit|, absolute: f32 summation order only (measured 0.8e-6 .. 1.9e-6; logits are O(1))
FFN_SUFFIXES = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")


def hf_logits(model_dir: Path, ids: np.ndarray, ffn: str | None) -> np.ndarray:
    m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    m.eval()
    n = 0
    if ffn is not None:
        qtype = getattr(gguf.GGMLQuantizationType, ffn.upper())
        with torch.no_grad():
            for name, p in m.named_parameters():
                if name.endswith(FFN_SUFFIXES):
                    w = p.detach().numpy().astype(np.float32)
                    deq = quants.dequantize(quants.quantize(w, qtype), qtype).reshape(w.shape)
                    p.copy_(torch.from_numpy(np.ascontiguousarray(deq, dtype=np.float32)))
                    n += 1
        assert n == 3 * m.config.num_hidden_layers, n
    with torch.no_grad():
        out: np.ndarray = m(torch.tensor(ids[None, :].astype(np.int64)), use_cache=False).logits[0].float().numpy()
    return out


@pytest.mark.parametrize("ffn", ["q8_0", "q4_0"])
@pytest.mark.parametrize("family,model", [("llama", MODELS / "llama"), ("qwen3", FAMILIES / "qwen3"),
                                          ("gemma3", FAMILIES / "gemma3")], ids=["llama", "qwen3", "gemma3"])
def test_block_ffn_logits_equal_transformers_on_dequantized_weights(tmp_path, family, model, ffn):
    root = tmp_path / "root"
    r = subprocess.run([STK, "convert", "--in", str(model), "--out", str(root), "--profile", "faithful", "--ffn", ffn,
                        "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    ids = np.random.default_rng(37).integers(0, vocab, CTX).astype(np.int32)
    lm = LanguageModel(root)
    assert lm.ffn_dtype == ffn
    got = lm.sequence(sinks=0, window=CTX).feed(ids, all_logits=True)
    want = hf_logits(model, ids, ffn)
    d = float(np.abs(got - want).max())
    own = float(np.abs(hf_logits(model, ids, None) - want).max())  # what the blocks change
    print(f"{family} --ffn {ffn}: max |dlogit| {d:.3g} against transformers on gguf-py's dequantised FFN "
          f"(bound {BOUND:g}); the blocks' own change {own:.3g}")
    assert d <= BOUND, d
    assert (got.argmax(-1) == want.argmax(-1)).all()
    assert own > 10 * BOUND
