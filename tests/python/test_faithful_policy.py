"""The faithful profile's retention policy (issue 37; docs/format.md "Runtime block" runtime.policy /
runtime.recent): `stk convert --profile faithful --policy P [--recent R]` writes it into the
manifest's runtime block, `stk inspect` / `stk check` / stk.lm report it, a sequence opened with no
explicit policy keeps it (STK_SEQ_POLICY_DEFAULT), and `stk generate` / `stk eval` take it unless
--policy says otherwise.  The runs compared here are the Python Sequence's with the policy named
explicitly (its eviction rules are tested against tests/lm_policy_reference.py in
test_lm_policy.py): bit-equal logits, the same greedy tokens.

On tests/fixtures/eval/tiny-llama (261-token vocabulary, its own tokenizer), 2 sinks + 16, contexts
of 48 tokens (the state evicts from token 18 on).
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import stk
from stk import evaluation
from stk.lm import LanguageModel, Tokenizer
from conftest import SOURCE_ROOT, TINY_LLAMA  # `text`: conftest's prose

STK = os.environ.get("STK_BIN", str(SOURCE_ROOT / "build-test" / "src" / "cli" / "stk"))
CTX, SINKS, WINDOW, RECENT = 48, 2, 16, 6


def run_convert(root, *extra):
    return subprocess.run([STK, "convert", "--in", str(TINY_LLAMA), "--out", str(root), "--profile", "faithful",
                           "--sinks", str(SINKS), "--window", str(WINDOW), "--json", *extra], capture_output=True,
                          text=True)


@pytest.fixture(scope="module")
def h2o_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy") / "h2o"
    r = run_convert(root, "--policy", "h2o", "--recent", str(RECENT))
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def manifest_path(root):
    return next((root / "generations").iterdir()) / "sera_manifest.bin"


def runtime_tail(root):
    """(policy, recent, offset of runtime.policy) from the manifest's bytes: the block's last two
    u32 fields (docs/format.md: +540, +544), before n_layers 16-byte entries and the two hashes."""
    b = manifest_path(root).read_bytes()
    n_layers = json.loads((TINY_LLAMA / "config.json").read_text())["num_hidden_layers"]
    at = len(b) - 64 - 16 * n_layers - 8
    policy, recent = struct.unpack_from("<II", b, at)
    return policy, recent, at


def test_policy_round_trips(h2o_root):
    policy, recent, _ = runtime_tail(h2o_root)
    assert (policy, recent) == (2, RECENT)
    r = subprocess.run([STK, "inspect", "--in", str(h2o_root), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["runtime"] == {"sinks": SINKS, "window": WINDOW, "ffn_dtype": "q8_0", "policy": "h2o",
                                               "recent": RECENT}
    r = subprocess.run([STK, "check", "--out", str(h2o_root)], capture_output=True, text=True)
    assert r.returncode == 0 and "FFN q8_0, policy h2o)" in r.stdout, r.stdout + r.stderr
    lm = LanguageModel(h2o_root)
    assert lm.runtime == {"sinks": SINKS, "window": WINDOW, "policy": "h2o", "recent": RECENT}
    assert lm.ffn_dtype == "q8_0"
    # A model read from its checkpoint has no runtime block: its FFN as opened.
    ck = LanguageModel(TINY_LLAMA)
    assert ck.runtime is None and ck.ffn_dtype == "f32"
    assert LanguageModel(TINY_LLAMA, bf16=True, ffn="q4_0").ffn_dtype == "q4_0"
    # stk.convert (the C ABI) writes the same manifest as the command.
    py = h2o_root.parent / "py"
    stk.convert(TINY_LLAMA, py, profile="faithful", sinks=SINKS, window=WINDOW, policy="h2o", recent=RECENT)
    assert manifest_path(py).read_bytes() == manifest_path(h2o_root).read_bytes()


def test_default_sequence_keeps_the_manifest_policy(h2o_root, text):
    ids = Tokenizer(TINY_LLAMA).encode(open(text, encoding="utf-8").read())[:CTX]
    lm = LanguageModel(h2o_root)
    got = lm.sequence().feed(ids, all_logits=True)  # no policy named: the runtime block's
    want = lm.sequence(sinks=SINKS, window=WINDOW, policy="h2o", recent=RECENT).feed(ids, all_logits=True)
    np.testing.assert_array_equal(got, want)
    seq = lm.sequence()
    seq.feed(ids)
    ref = lm.sequence(sinks=SINKS, window=WINDOW, policy="h2o", recent=RECENT)
    ref.feed(ids)
    assert seq.kept(0) == ref.kept(0)
    # The policy is in force: the window's state holds other positions, its logits differ.
    win = lm.sequence(sinks=SINKS, window=WINDOW, policy="window").feed(ids, all_logits=True)
    assert not np.array_equal(win, want)
    # h2o's recent count defaults to the manifest's only under its own policy; an explicit one wins.
    r4 = lm.sequence(policy="h2o", recent=4).feed(ids, all_logits=True)
    np.testing.assert_array_equal(r4, lm.sequence(sinks=SINKS, window=WINDOW, policy="h2o", recent=4)
                                  .feed(ids, all_logits=True))


def greedy(lm, ids, n, **kw):
    seq = lm.sequence(**kw)
    out = []
    logits = seq.feed(ids)
    for _ in range(n):
        t = int(np.argmax(logits))  # ties: the lower id, as stk generate
        out.append(t)
        logits = seq.feed([t])
    return out


@pytest.mark.parametrize("flag", [None, "tova", "window"])
def test_generate_takes_the_policy(h2o_root, flag):
    prompt = "the thin thing in the heather, then hello there " * 2
    args = [STK, "generate", "--gen", str(h2o_root), "--in", str(TINY_LLAMA), "--prompt", prompt, "--tokens", "24",
            "--json"]
    if flag:
        args += ["--policy", flag]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    policy = flag or "h2o"
    assert (out["sinks"], out["window"], out["policy"]) == (SINKS, WINDOW, policy)
    assert out["recent"] == (RECENT if policy == "h2o" else 0)
    lm = LanguageModel(h2o_root)
    assert len(out["prompt_ids"]) + 24 > SINKS + WINDOW  # the state evicts
    want = greedy(lm, out["prompt_ids"], 24, sinks=SINKS, window=WINDOW, policy=policy,
                  recent=RECENT if policy == "h2o" else 0)
    assert out["ids"] == want


def test_generate_and_convert_refusals(h2o_root, tmp_path):
    base = [STK, "generate", "--gen", str(h2o_root), "--in", str(TINY_LLAMA), "--prompt", "hello", "--json"]
    r = subprocess.run(base + ["--policy", "lru"], capture_output=True, text=True)
    assert r.returncode == 2 and "--policy lru" in r.stderr
    r = subprocess.run(base + ["--policy", "tova", "--recent", "3"], capture_output=True, text=True)
    assert r.returncode == 2 and "--recent needs the h2o policy" in r.stderr
    r = run_convert(tmp_path / "a", "--policy", "lru")
    assert r.returncode == 2 and "--policy lru" in r.stderr
    r = run_convert(tmp_path / "b", "--recent", "3")
    assert r.returncode == 2 and "--recent needs --policy h2o" in r.stderr
    r = run_convert(tmp_path / "c", "--policy", "h2o", "--recent", str(WINDOW))
    assert r.returncode != 0 and "recent = 16" in r.stdout + r.stderr
    r = subprocess.run([STK, "convert", "--in", str(TINY_LLAMA), "--out", str(tmp_path / "d"), "--policy", "tova"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--policy needs --profile faithful" in r.stderr


def test_eval_takes_the_policy(h2o_root, text):
    """stk eval --gen: the converted side is stk.lm on the generation with the runtime block's policy,
    or --policy's: its top-1 agreement recomputed here from the explicit Sequence."""
    ids = Tokenizer(TINY_LLAMA).encode(open(text, encoding="utf-8").read())
    orig = LanguageModel(TINY_LLAMA).sequence(sinks=0, window=CTX)
    lm = LanguageModel(h2o_root)
    for flag, kw in ((None, {"policy": "h2o", "recent": RECENT}), ("tova", {"policy": "tova"})):
        r = evaluation.evaluate(str(TINY_LLAMA), str(h2o_root), [text], ctx=CTX, contexts=3, policy=flag)
        agree = []
        for i in range(3):
            x = ids[i * CTX:(i + 1) * CTX]
            orig.reset()
            lo = orig.feed(x, all_logits=True)
            ls = lm.sequence(sinks=SINKS, window=WINDOW, **kw).feed(x, all_logits=True)
            agree += list(lo.argmax(-1) == ls.argmax(-1))
        assert r["top1_agreement"] == float(np.mean(agree)), flag
    p = subprocess.run([sys.executable, "-m", "stk", "eval", "--model", str(TINY_LLAMA), "--gen", str(h2o_root),
                        "--text", text, "--ctx", str(CTX), "--contexts", "3", "--policy", "tova"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert f"{SINKS} sinks + a window of {WINDOW}, FFN q8_0, policy tova" in p.stdout
    p = subprocess.run([sys.executable, "-m", "stk", "eval", "--model", str(TINY_LLAMA), "--text", text, "--policy",
                        "tova"], capture_output=True, text=True)
    assert p.returncode == 2 and "--policy" in p.stderr


def test_check_refuses_a_corrupted_policy_byte(h2o_root, tmp_path):
    """runtime.policy = 7 (no such policy), the manifest's own hash made to agree: stk check refuses
    it by the field's name and offset."""
    import shutil
    root = tmp_path / "root"
    shutil.copytree(h2o_root, root)
    _, _, at = runtime_tail(root)
    p = manifest_path(root)
    b = bytearray(p.read_bytes())
    b[at] = 7
    b[-32:] = hashlib.sha256(bytes(b[:-32])).digest()
    p.chmod(0o644)
    p.write_bytes(bytes(b))
    r = subprocess.run([STK, "check", "--out", str(root)], capture_output=True, text=True)
    assert r.returncode != 0 and "runtime.policy" in r.stdout + r.stderr, r.stdout + r.stderr
    assert f"offset {at}" in r.stdout + r.stderr
