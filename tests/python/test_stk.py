"""The Python package against its references: numpy reading the files as docs/format.md lays them
out, safetensors' numpy loader for the weights, tests/lwt_reader.py (written from the docs alone)
for the .lwt codes, the tokenizers package for BPE ids, and the stk command for the reports."""
import ctypes
import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import lwt_reader
import stk
from stk import _lib

# ---------------------------------------------------------------------------------------------
# helpers

SERA_NUMPY = {1: "<f8", 2: "<f4", 3: "<i4", 4: "<i2", 5: "i1", 6: "u1", 7: "<i2", 8: "<i2", 9: "<u2"}


def read_array_file(path: Path):
    """A Sera array file parsed with numpy from docs/format.md's header table (not stk's code)."""
    b = path.read_bytes()
    magic, dtype, rank = struct.unpack_from("<IHH", b, 0)
    dims = struct.unpack_from("<5Q", b, 8)
    (byte_len, ) = struct.unpack_from("<Q", b, 48)
    (sha_low64, ) = struct.unpack_from("<Q", b, 64)
    assert magic == 0x53455241
    payload = b[128:128 + byte_len]
    assert int.from_bytes(hashlib.sha256(payload).digest()[:8], "little") == sha_low64
    return np.frombuffer(payload, SERA_NUMPY[dtype]).reshape(dims[:rank]), dtype


def owner_of(a: np.ndarray):
    """Walk the array's base chain to the object that owns the mapping."""
    obj = a
    for _ in range(8):
        if isinstance(obj, np.ndarray):
            obj = obj.base
        elif isinstance(obj, memoryview):
            obj = obj.obj
        elif hasattr(obj, "_stk_owner"):
            return obj._stk_owner
        else:
            return None
    return None


def hf_reference(tiny: Path):
    """The tiny GPT-2's weights as safetensors' numpy loader gives them, under the .lwt names
    (GPT-2's Conv1D weights [in, out] transposed to [out, in], as docs/format.md says)."""
    ref = {}
    for k, v in load_file(str(tiny / "model.safetensors")).items():
        if k.endswith(".attn.bias"):  # the causal-mask buffer, not a parameter
            continue
        if v.ndim == 2 and k.startswith("h.") and k.endswith(".weight"):
            v = v.T
        ref["transformer." + k] = np.ascontiguousarray(v)
    return ref


# ---------------------------------------------------------------------------------------------
# convert, inspect, check

def test_convert_summary_matches_the_command(converted, tiny, tmp_path):
    root, s = converted
    assert s["published"] and s["arrays"] == 22 and s["bytes"] == 382144
    assert s["tokenizer"]["mode"] == "ext" and "Sardinas-Patterson rejects" in s["tokenizer"]["reason"]
    assert [st["stage"] for st in s["stages"]] == [_lib.lib.stk_stage_name(i).decode() for i in range(1, 11)]
    assert all(st["status"] == "ok" for st in s["stages"])
    # The command converting the same model into another root gives the same generation and digests.
    out = subprocess.run([_lib.binary_path(), "convert", str(tiny), str(tmp_path / "cli"), "--json"],
                         capture_output=True, text=True, check=True)
    cli = json.loads(out.stdout)
    assert cli["generation"] == s["generation"] and cli["arrays"] == s["arrays"] and cli["bytes"] == s["bytes"]
    assert [(c["crc32c"], c["sha256_low64"]) for c in cli["stages"]] == \
        [(p["crc32c"], p["sha256_low64"]) for p in s["stages"]]
    assert cli["tokenizer"] == s["tokenizer"] and cli["arena_bytes"] <= s["arena_bytes"] + 64


def test_inspect_is_the_command_json(converted, tiny):
    root, s = converted
    for path in (root, tiny):
        out = subprocess.run([_lib.binary_path(), "inspect", str(path), "--json"], capture_output=True, text=True,
                             check=True)
        assert stk.inspect(path) == json.loads(out.stdout)
    assert stk.inspect(root)["generation"] == s["generation"]


def test_check(converted):
    root, _ = converted
    r = stk.check(root)
    assert r["ok"] and r["arrays"] == 22 and r["bytes"] == 382144 and r["chain"] == [r["generation"]]


def test_errors_carry_status_and_message(tmp_path, converted):
    with pytest.raises(stk.StkError) as e:
        stk.Generation(tmp_path / "nothing")
    assert e.value.status == stk.Status.NOT_FOUND and e.value.status_name == "STK_E_NOT_FOUND"
    assert str(tmp_path / "nothing") in e.value.message
    with pytest.raises(stk.StkError) as e:
        stk.inspect(tmp_path / "nothing")
    assert e.value.result["ok"] is False and e.value.status == e.value.result["status_code"]
    with pytest.raises(stk.StkError) as e:
        stk.convert(tmp_path / "no-model", tmp_path / "r")
    assert e.value.status == stk.Status.NOT_FOUND


def test_flipped_bit_is_refused(converted, tmp_path):
    root, s = converted
    import shutil
    gen = tmp_path / "gen"
    shutil.copytree(s["generation_dir"], gen)
    f = gen / "arrays" / "prf_W.bin"
    b = bytearray(f.read_bytes())
    b[128 + 1000] ^= 0x10
    f.write_bytes(bytes(b))
    with pytest.raises(stk.StkError) as e:
        stk.Generation(gen)
    assert e.value.status == stk.Status.CHECKSUM and "prf_W.bin" in e.value.message
    with pytest.raises(stk.StkError) as e:
        stk.check(gen)
    assert e.value.status == stk.Status.CHECKSUM


# ---------------------------------------------------------------------------------------------
# Generation: arrays without a copy, manifest, lookups

def test_arrays_are_the_files_bytes(converted):
    root, s = converted
    with stk.Generation(root) as gen:
        assert gen.dir == s["generation_dir"]
        man = gen.manifest
        assert list(gen.arrays) == [a["name"] for a in man["arrays"]] and len(gen.arrays) == 22
        for entry in man["arrays"]:
            a = gen.arrays[entry["name"]]
            want, _ = read_array_file(Path(gen.dir) / "arrays" / entry["name"])
            assert a.shape == tuple(entry["shape"]) and a.dtype == want.dtype
            assert a.tobytes() == want.tobytes()
            assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[...] = 0


def test_arrays_are_zero_copy(converted):
    root, _ = converted
    gen = stk.Generation(root)
    name = max(gen.arrays, key=lambda n: gen.array_info(n)["byte_len"])
    nbytes = gen.array_info(name)["byte_len"]
    tracemalloc.start()
    a = gen.arrays[name]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert a.nbytes == nbytes and nbytes >= 65536
    assert peak < nbytes // 8, f"{peak} bytes allocated for a view of {nbytes}"
    # The base chain ends at the mapping, and the data pointer is the library's.
    assert owner_of(a) is gen._map
    v = gen._view_struct(name)
    assert a.__array_interface__["data"][0] == v.data and v.data % 64 == 0
    with pytest.raises(ValueError):
        a.flags.writeable = True
    # The mapping outlives the Generation object while an array views it.
    before = a.copy()
    del gen
    import gc
    gc.collect()
    assert np.array_equal(a, before)


def test_generation_stays_valid_while_a_new_one_is_published(fresh_root, tiny):
    stk.convert(tiny, fresh_root)
    old = stk.Generation(fresh_root)
    arrays = {n: old.arrays[n] for n in old.arrays}
    snapshot = {n: a.tobytes() for n, a in arrays.items()}
    s2 = stk.convert(tiny, fresh_root, r=256)  # a different generation becomes current
    assert s2["previous"] == old.manifest["generation"] and s2["generation_dir"] != old.dir
    # The old one removed from the root altogether: the open generation keeps its mapping.
    subprocess.run([_lib.binary_path(), "generations", str(fresh_root), "--remove", old.name, "--force"],
                   check=True, capture_output=True)
    assert not Path(old.dir).exists()
    assert {n: a.tobytes() for n, a in arrays.items()} == snapshot
    assert old.dequantized("prf_W.bin").shape == arrays["prf_W.bin"].shape
    with stk.Generation(fresh_root) as new:
        assert new.dir == s2["generation_dir"] and new.arrays["prf_W.bin"].shape[1] == 256


def test_lookups_against_the_arrays_and_vocab(fresh_root, tiny):
    stk.convert(tiny, fresh_root, allow_uncertified_tokenizer=True)
    gen = stk.Generation(fresh_root)
    # Token tables: every vocab.json entry, its bytes through GPT-2's byte-to-unicode map.
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    rest = [b for b in range(256) if b not in bs]
    cs = bs + [256 + n for n in range(len(rest))]
    bs = bs + rest
    dec = {chr(c): b for b, c in zip(bs, cs)}
    vocab = json.loads((tiny / "vocab.json").read_text())
    for piece, tid in vocab.items():
        raw = bytes(dec[ch] for ch in piece)
        if len(raw) > 8:  # the tables hold pieces of 1..ltok bytes
            continue
        assert gen.token_bytes(tid) == raw
        assert gen.token_id(raw) == tid
    with pytest.raises(stk.StkError) as e:
        gen.token_bytes(len(vocab) + 100)
    assert e.value.status == stk.Status.KEY_NOT_FOUND
    # Linear dictionary: every base key answers its stored weight.
    keys = gen.arrays["linear_keys.bin"].view("<u8").ravel()
    weights = gen.arrays["linear_weights.bin"]
    got = np.array([gen.linear(int(k)) for k in keys], dtype=np.float32)
    assert len(keys) == 768 and np.array_equal(got, weights)
    # Hubs: token row | context row of bridge_hubs.bin.
    hubs = gen.arrays["bridge_hubs.bin"].view("<u8")
    hubs = hubs.reshape(hubs.shape[0], -1)
    tokens = gen.arrays["bridge_qDin.bin"].shape[0]
    for t, c in [(0, 0), (5, 3), (tokens - 1, hubs.shape[0] - tokens - 1)]:
        assert np.array_equal(gen.hub(t, c), hubs[t] | hubs[tokens + c])


# ---------------------------------------------------------------------------------------------
# Cancellation

def test_exception_in_progress_cancels_and_leaves_the_root_as_it_was(fresh_root, tiny):
    stk.convert(tiny, fresh_root)
    before = sorted(p.relative_to(fresh_root) for p in fresh_root.rglob("*"))
    current = (fresh_root / "CURRENT").read_bytes()
    seen = []

    def progress(name, index, total):
        seen.append(name)
        if index == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stk.convert(tiny, fresh_root, r=256, progress=progress)
    assert seen == ["parse_tensors", "tokenizer_build_or_wrap", "prf_build", "overlays_build"]
    assert sorted(p.relative_to(fresh_root) for p in fresh_root.rglob("*")) == before  # no staging left
    assert (fresh_root / "CURRENT").read_bytes() == current


def test_sigint_cancels_a_convert(fresh_root, tiny):
    """A real SIGINT (what Ctrl-C sends) during a convert: KeyboardInterrupt, nothing published."""
    def progress(name, index, total):
        if index == 6:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        stk.convert(tiny, fresh_root, progress=progress)
    assert not fresh_root.exists()  # the root this call created is removed, as the command does


def test_cancel_before_publication_through_the_c_api(fresh_root, tiny):
    """stk_job_cancel after manifest_emit: the check stage returns STK_E_CANCELLED and does not publish."""
    c = _lib.lib
    p = _lib.JobParams()
    p.struct_size = ctypes.sizeof(p)
    p.in_dir, p.out_dir, p.flags = str(tiny).encode(), str(fresh_root).encode(), _lib.STK_JOB_PUBLISH_ROOT
    size = ctypes.c_size_t()
    assert c.stk_job_arena_size(ctypes.byref(p), ctypes.byref(size)) == 0
    arena = ctypes.create_string_buffer(size.value)
    job = ctypes.c_void_p()
    assert c.stk_open(ctypes.byref(p), arena, size.value, ctypes.byref(job)) == 0
    for i in range(1, 10):
        assert c.stk_stage_run(job, i) == 0
    c.stk_job_cancel(job)
    assert c.stk_stage_run(job, 10) == stk.Status.CANCELLED
    assert b"cancelled" in c.stk_last_error()
    c.stk_close(job)
    assert not (fresh_root / "CURRENT").exists()
    assert [p.name for p in fresh_root.iterdir() if p.is_dir() and p.name != "generations"] == []
    assert not list((fresh_root / "generations").iterdir()) if (fresh_root / "generations").exists() else True


# ---------------------------------------------------------------------------------------------
# .lwt

def test_read_lwt_float32_is_the_safetensors_weights_without_copy(tmp_path, tiny):
    out = tmp_path / "tiny.lwt"
    rep = stk.export_lwt(tiny, out)
    ref = hf_reference(tiny)
    lwt = stk.read_lwt(out)
    assert rep["tensors"] == len(lwt) and rep["tied_lm_head"] is True
    assert set(lwt) == set(ref)
    for name, want in ref.items():
        a = lwt[name]
        assert a.dtype == np.float32 and a.shape == want.shape
        assert np.array_equal(a.view(np.uint32), want.view(np.uint32)), name
        assert owner_of(a) is lwt._map and not a.flags.writeable
    big = max(lwt, key=lambda n: lwt[n].nbytes)
    fresh = stk.read_lwt(out)
    tracemalloc.start()
    a = fresh[big]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < a.nbytes // 8


    torch = pytest.importorskip("torch")  # pinned in the test references (scripts/requirements-test.txt)
    torch = pytest.importorskip("torch")  # the test venv has none: the dev venv runs this
    model = Path(os.environ.get("STK_TEST_DATA", Path(__file__).resolve().parents[1] / "data")) / "models" / "gpt2"
    state = torch.load(model / "pytorch_model.bin", map_location="cpu")
    stk.export_lwt(model, tmp_path / "g.lwt")
    lwt = stk.read_lwt(tmp_path / "g.lwt")
    for name in lwt:
        src = state[name[len("transformer."):]].to(torch.float32).numpy()
        if src.ndim == 2 and ".h." in "." + name and name.endswith(".weight"):
            src = src.T
        assert np.array_equal(lwt[name], src), name


@pytest.mark.parametrize("dtype", list(stk.LWT_DTYPES))
def test_lwt_round_trip_every_dtype(tmp_path, tiny, dtype):
    out = tmp_path / f"tiny.{dtype}.lwt"
    if dtype in ("q4_0", "q8_0"):  # the tiny GPT-2's rows are 16 wide: not whole blocks of 32
        with pytest.raises(stk.StkError) as e:
            stk.export_lwt(tiny, out, dtype=dtype, threads=2)
        assert e.value.status == stk.Status.UNSUPPORTED and "whole blocks of 32" in str(e.value)
        assert not out.exists()
        model = Path(os.environ.get("STK_TEST_DATA", Path(__file__).resolve().parents[1] / "data")) / "models" / "llama_f32"
        _check_lwt_dtype(tmp_path / f"llama.{dtype}.lwt", model, dtype, _safetensors_reference(model))
        return
    _check_lwt_dtype(out, tiny, dtype, hf_reference(tiny))


def _safetensors_reference(model: Path):
    """A safetensors checkpoint's tensors (the llama_f32 fixture transformers wrote), as
    safetensors' numpy loader gives them: the names and shapes the .lwt keeps for non-GPT-2 families."""
    ref = {}
    for shard in sorted(model.glob("*.safetensors")):
        ref.update({k: np.ascontiguousarray(v.astype(np.float32)) for k, v in load_file(str(shard)).items()})
    return ref


def _check_lwt_dtype(out: Path, model: Path, dtype: str, ref):
    stk.export_lwt(model, out, dtype=dtype, threads=2)
    raw = stk.read_lwt(out)
    deq = stk.read_lwt(out, dequantize=True)
    assert stk.inspect(out)["header"]["dtype"] == dtype
    for name in raw:
        src = ref[name]
        info = raw.info(name)
        want = dtype if src.ndim >= 2 else "float32"
        assert info["dtype"] == want and info["shape"] == src.shape
        r = raw[name]
        d = deq[name]
        assert d.dtype == np.float32 and d.shape == src.shape
        if want in ("float32", "float16", "bfloat16", "int8", "uint8"):
            assert r.shape == src.shape  # the numpy types: views shaped like the tensor
        if want in ("q4_0", "q8_0"):
            # ggml's blocks: the bytes gguf-py's quantize writes for the same float32 values, the
            # values its dequantize gives (and the independent reader's rule from the docs).
            gguf = pytest.importorskip("gguf")
            qt = getattr(gguf.GGMLQuantizationType, want.upper())
            flat = src.reshape(-1, src.shape[-1]).astype(np.float32)
            ref_bytes = np.asarray(gguf.quants.quantize(flat, qt)).reshape(-1)
            assert np.array_equal(r, ref_bytes) and np.array_equal(r, lwt_reader.block_quantise(want, src.reshape(-1)))
            ref_vals = np.asarray(gguf.quants.dequantize(ref_bytes.reshape(flat.shape[0], -1), qt), dtype=np.float32)
            assert np.array_equal(d.reshape(-1).view(np.uint32), ref_vals.reshape(-1).view(np.uint32)), name
            assert info["scale"] == 1.0 and info["zero_point"] == 0
            continue
        # The packed codes, parsed by the independent reader, against the docs' quantisation rule.
        bits = {"float32": 32, "float16": 16, "bfloat16": 16, "int8": 8, "uint8": 8, "int4": 4, "uint4": 4,
                "fp4": 4, "int2": 2, "uint2": 2, "ternary": 2, "binary": 1}[want]
        t = {"raw": np.ascontiguousarray(r).view(np.uint8).reshape(-1), "n": src.size, "bits": bits, "name": name,
             "dtype": want, "scale": np.float32(info["scale"]), "zp": info["zero_point"]}
        fields = lwt_reader.fields(t).astype(np.int64)
        flat = src.reshape(-1)
        if want == "float32":
            assert np.array_equal(r.view(np.uint32), src.view(np.uint32))
        elif want == "float16":
            assert np.array_equal(r, src.astype(np.float16))
        elif want == "bfloat16":
            assert np.array_equal(fields, lwt_reader.bf16_rne(flat).astype(np.int64))
        else:
            codes, scale, zp = lwt_reader.quantise(want, flat)
            assert np.array_equal(fields, codes) and scale == np.float32(info["scale"]) and zp == info["zero_point"]
        # stk's dequantisation == the docs' values of those codes, bit for bit.
        assert np.array_equal(d.reshape(-1).view(np.uint32), lwt_reader.values(t).view(np.uint32)), name


# ---------------------------------------------------------------------------------------------
# tokenize, python -m stk

def test_tokenize_against_the_tokenizers_package(tiny):
    tokenizers = pytest.importorskip("tokenizers")
    bpe = tokenizers.ByteLevelBPETokenizer(str(tiny / "vocab.json"), str(tiny / "merges.txt"))
    for text in ["hello world", "The quick brown fox", "  spaces\tand\nlines"]:
        assert stk.tokenize(tiny, text) == bpe.encode(text).ids


def test_python_m_stk_is_the_command(converted):
    root, _ = converted
    for args in (["--version"], ["inspect", str(root), "--json"], ["check", str(root / "nope")]):
        a = subprocess.run([sys.executable, "-m", "stk", *args], capture_output=True, text=True)
        b = subprocess.run([_lib.binary_path(), *args], capture_output=True, text=True)
        assert (a.returncode, a.stdout) == (b.returncode, b.stdout)


def test_console_script_help_and_python_commands():
    """`stk` (pyproject.toml's console script: stk.cli:main, argv[0] the script) and `python -m stk`:
    --help is the binary's usage after one line naming the Python commands; `help eval` is
    `eval --help` (the binary has no eval)."""
    script = "import sys; from stk.cli import main; sys.argv[0] = '/venv/bin/stk'; sys.exit(main())"
    usage = subprocess.run([_lib.binary_path(), "--help"], capture_output=True, text=True).stdout
    for cmd, prog in (([sys.executable, "-c", script], "stk"), ([sys.executable, "-m", "stk"], "python -m stk")):
        r = subprocess.run([*cmd, "--help"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout == (f"{prog}: the stk command (below), plus the Python commands: `eval`, `calibrate` "
                            f"({prog} eval --help)\n\n" + usage)
        for name in ("eval", "calibrate"):
            r = subprocess.run([*cmd, "help", name], capture_output=True, text=True)
            assert r.returncode == 0 and r.stdout.startswith(f"usage: stk {name} "), (r.stdout[:200], r.stderr)
    # any other `help COMMAND` is the binary's
    r = subprocess.run([sys.executable, "-c", script, "help", "check"], capture_output=True, text=True)
    b = subprocess.run([_lib.binary_path(), "help", "check"], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (b.returncode, b.stdout) and b.stdout.startswith("usage: stk check ")


def test_progress_true_draws_a_tqdm_bar(fresh_root, tiny, capsys):
    pytest.importorskip("tqdm")
    s = stk.convert(tiny, fresh_root, progress=True)
    err = capsys.readouterr().err
    assert s["published"] and "stk convert" in err and "10/10" in err


def test_version():
    assert stk.version() == stk.__version__ == "0.1.0"
