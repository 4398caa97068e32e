"""stk.lm's retention policies and block-scaled FFN option (issue 37) through the Python binding.
The policies' rules are checked against a numpy reference in tests/lm_policy_reference.py; here:
the binding passes policy / recent / ffn through and reads the held positions back."""
import numpy as np
import pytest

from stk.errors import StkError
from stk.lm import LanguageModel

from conftest import SOURCE_ROOT

LLAMA = SOURCE_ROOT / "tests" / "data" / "models" / "llama_f32"
TOKENS = np.random.default_rng(37).integers(0, 96, 20)


def test_policies_hold_sinks_plus_window():
    lm = LanguageModel(LLAMA)
    for policy in ("window", "tova", "h2o", "tova-head"):
        seq = lm.sequence(sinks=2, window=5, policy=policy)
        seq.feed(TOKENS)
        for layer in range(lm.n_layers):
            for kv in range(lm.n_kv_heads):
                held = seq.kept(layer, kv)
                assert len(held) == 7 and held[:2] == [0, 1] and held[-1] == 19, (policy, layer, kv, held)
        if policy == "window":
            assert seq.kept(0) == [0, 1, 15, 16, 17, 18, 19]
        seq.reset()
        assert seq.kept(0) == []


def test_refusals():
    lm = LanguageModel(LLAMA)
    with pytest.raises(ValueError):
        lm.sequence(policy="lru")
    with pytest.raises(StkError):
        lm.sequence(sinks=0, window=4, policy="h2o", recent=4)
    seq = lm.sequence(sinks=2, window=5, policy="tova-head")
    with pytest.raises(StkError):
        seq.kept(0, lm.n_kv_heads)
    with pytest.raises(ValueError):
        LanguageModel(LLAMA, ffn="q3_k")


def test_block_scaled_ffn_stays_close():
    full = LanguageModel(LLAMA).sequence(sinks=0, window=64).feed(TOKENS, all_logits=True)
    for ffn, bound in (("q8_0", 0.05), ("q4_0", 0.5)):
        got = LanguageModel(LLAMA, ffn=ffn).sequence(sinks=0, window=64).feed(TOKENS, all_logits=True)
        d = float(np.max(np.abs(got - full)))
        assert 0 < d < bound, (ffn, d)
