"""The reference runtime (stk.runtime, stk.h's stk_prf_* / stk_overlay_* / stk_ffn_* /
stk_memory_*) against numpy recomputations written from docs/format.md, on the tiny-gpt2
generation and on a GGUF family fixture (tiny Llama, f32).

- D (PRF's whitening diagonal) comes from the model's own W_K here (docs/format.md: D_l[j] =
  max(mean_i W_K[i, j]^2, 1e-8)), not from the runtime's recovery out of prf_W: the comparison
  checks the recovery too.
- PRF and overlays: plain float64 numpy without any shift; the C code sums in a fixed order with
  a running exponent offset, so they agree to rounding: relative 1e-6 of each output row's
  largest magnitude (f32 output, the exponent's dot product in another order, D from the weights
  against D recovered to ~1e-8).
- FFN: exact (the same double products and the same order, j ascending, one rounding).
- Memory: exact (the same DF-II-T recurrence and Kahan sum).
"""
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import stk
from stk.runtime import ReferenceRuntime

TEST_DATA = Path(os.environ.get("STK_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))
REL = 1e-6


def _gpt2_wk(model_dir: Path, n_layers: int) -> list[np.ndarray]:
    from safetensors.numpy import load_file
    t = load_file(str(model_dir / "model.safetensors"))
    out = []
    for l in range(n_layers):
        w = t[f"h.{l}.attn.c_attn.weight"]  # Conv1D [d_model, 3 d_model]: W_K^T = columns d..2d
        d = w.shape[0]
        out.append(np.ascontiguousarray(w[:, d:2 * d].T))  # HF layout [d_kv, d_model]
    return out


def _gguf_wk(path: Path, n_layers: int) -> list[np.ndarray]:
    import gguf
    r = gguf.GGUFReader(str(path))
    t = {x.name: x for x in r.tensors}
    # gguf-py gives [rows, cols] = [d_kv, d_model]; llama.cpp's rotary row permutation does not
    # change a column's mean square.
    return [np.asarray(t[f"blk.{l}.attn_k.weight"].data, dtype=np.float32) for l in range(n_layers)]


@pytest.fixture(scope="module")
def gens(tmp_path_factory):
    base = tmp_path_factory.mktemp("refrun")
    tiny = Path(os.environ.get("STK_SOURCE_ROOT", Path(__file__).resolve().parents[2])) / "bindings/testdata/tiny-gpt2"
    stk.convert(tiny, base / "gpt2", threads=2, allow_uncertified_tokenizer=True)
    llama = base / "llama-model" / "tiny-llama-f32.gguf"  # alone in its directory: the model path
    llama.parent.mkdir()
    shutil.copyfile(TEST_DATA / "gguf" / "tiny-llama-f32.gguf", llama)
    stk.convert(llama.parent, base / "llama", threads=2, allow_uncertified_tokenizer=True)
    return {"gpt2": (base / "gpt2", lambda L: _gpt2_wk(tiny, L)), "llama": (base / "llama", lambda L: _gguf_wk(llama, L))}


class Ref:
    """numpy from docs/format.md: the arrays as published, D from the model's W_K."""

    def __init__(self, gen: stk.Generation, wk: list[np.ndarray]):
        a = gen.arrays
        self.W = np.asarray(a["prf_W.bin"], dtype=np.float64)
        self.mu = np.asarray(a["whitening_mu.bin"], dtype=np.float64)
        self.sig2 = np.asarray(a["whitening_sig2.bin"], dtype=np.float64)
        self.R0 = np.asarray(a["R_init.bin"], dtype=np.float64)
        self.s0 = np.asarray(a["s_init.bin"], dtype=np.float64)
        self.H = np.asarray(a["overlays_H.bin"], dtype=np.float64)
        self.U = np.asarray(a["overlays_U.bin"], dtype=np.float64)
        self.Z = np.asarray(a["overlays_DeltaW.bin"], dtype=np.float64)
        self.coeff = np.asarray(a["memory_coeff.bin"], dtype=np.float64)
        # docs/format.md "Manifest": @148 u32 prf.r, @152 f64 prf.tau, @160 f64 prf.whitening_eps,
        # @176 f64 denominator.beta_floor.
        raw = (Path(gen.dir) / "sera_manifest.bin").read_bytes()
        r, = struct.unpack_from("<I", raw, 148)
        self.tau, self.eps = struct.unpack_from("<2d", raw, 152)
        self.beta, = struct.unpack_from("<d", raw, 176)
        self.D = [np.maximum((w.astype(np.float64) ** 2).mean(axis=0), 1e-8) for w in wk]
        self.r = self.W.shape[1]
        assert r == self.r

    def feats(self, l, X):
        """phi_w(x) = (r^-1/2 exp(w.x/sqrt(tau) - x^T D x/(2 tau)) - mu) / sqrt(max(sig2, eps)), rows of X."""
        X = X.astype(np.float64)
        e = X @ self.W[l].T / np.sqrt(self.tau) - (X * X * self.D[l]).sum(axis=1, keepdims=True) / (2 * self.tau)
        phi = np.exp(e) / np.sqrt(self.r)
        return (phi - self.mu[l]) / np.sqrt(np.maximum(self.sig2[l], self.eps))

    def impulse(self, n):
        h = np.zeros(n)
        for b0, b1, a1, a2 in self.coeff:  # sections in parallel: responses add
            y1 = y2 = 0.0
            for t in range(n):
                u0, u1 = (1.0 if t == 0 else 0.0), (1.0 if t == 1 else 0.0)
                y = b0 * u0 + b1 * u1 + a1 * y1 + a2 * y2
                h[t] += y
                y1, y2 = y, y1
        return h

    def prf(self, l, X, V, memory=False):
        F = self.feats(l, X)
        T = X.shape[0]
        w = self.impulse(T) if memory else np.ones(T)
        out = np.empty((T, V.shape[1]))
        for t in range(T):
            k = w[t - np.arange(t + 1)]  # h(t - s) for keys s <= t (the query sees its own key)
            R = self.R0[l] + (F[:t + 1] * k[:, None]).T @ V[:t + 1].astype(np.float64)
            s = self.s0[l] + (F[:t + 1] * k[:, None]).sum(axis=0)
            out[t] = F[t] @ R / max(F[t] @ s, self.beta)
        return out

    def delta(self, l, X):
        F = self.feats(l, X)
        return ((F @ self.H[l]) @ self.Z[l]) @ self.U[l].T  # U ((phi^T H) Z), row per query


def _close(got, want, what):
    scale = np.maximum(np.abs(want).max(axis=-1, keepdims=True), 1e-30)
    err = (np.abs(got.astype(np.float64) - want) / scale).max()
    assert err <= REL, f"{what}: max error {err:.3g} of the row's largest magnitude (bound {REL})"


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_prf_and_overlays_against_numpy(gens, name):
    root, wk = gens[name]
    with stk.Generation(root) as gen:
        rt = ReferenceRuntime(gen)
        assert rt.has_prf and rt.has_overlays and rt.has_memory and rt.has_linear
        ref = Ref(gen, wk(rt.n_layers))
        assert ref.W.shape == (rt.n_layers, rt.r, rt.d_model)
        rng = np.random.default_rng(7)
        T = 12
        for l in range(rt.n_layers):
            X = rng.standard_normal((T, rt.d_model)).astype(np.float32)
            V = rng.standard_normal((T, rt.d_v)).astype(np.float32)
            _close(rt.prf_run(l, X, V), ref.prf(l, X, V), f"{name} prf layer {l}")
            _close(rt.prf_run(l, X, V, memory=True), ref.prf(l, X, V, memory=True), f"{name} prf+memory layer {l}")
            _close(rt.overlay_delta(l, X), ref.delta(l, X), f"{name} deltaC layer {l}")
            # The incremental calls equal the sequence form bit for bit.
            st = rt.prf_state(l)
            inc = []
            for t in range(T):
                st.add_key(X[t], V[t])
                inc.append(st.read(X[t]))
            assert np.array_equal(np.stack(inc), rt.prf_run(l, X, V))
            # read_parts: num / den unfloored and log den, against numpy on the same keys.
            st = rt.prf_state(l)
            out0, lden0 = st.read_parts(X[0])
            assert lden0 == -np.inf and not out0.any()  # an empty state
            F = ref.feats(l, X)
            for t in range(T - 1):
                st.add_key(X[t], V[t])
            R = ref.R0[l] + F[:T - 1].T @ V[:T - 1].astype(np.float64)
            s = ref.s0[l] + F[:T - 1].sum(axis=0)
            out, lden = st.read_parts(X[T - 1])
            _close(out[None], (F[T - 1] @ R / (F[T - 1] @ s))[None], f"{name} read_parts layer {l}")
            assert abs(lden - np.log(F[T - 1] @ s)) <= 1e-6 * max(1.0, abs(lden)), (lden, np.log(F[T - 1] @ s))
        # Large inputs: exponents beyond f64's exp range (|e| > 709) stay finite and equal the
        # formula evaluated with the shift by hand (one key: out = f v f / max(f . f, beta), the
        # floor compared in the unshifted scale).  Whitening is the identity here (mu 0, sig2 1).
        assert not ref.mu.any() and np.all(ref.sig2 == 1)
        for scale in (30.0, 300.0, 3000.0):
            x = (rng.standard_normal((1, rt.d_model)) * scale).astype(np.float32)
            v = rng.standard_normal((1, rt.d_v)).astype(np.float32)
            xd = x.astype(np.float64)[0]
            e = ref.W[0] @ xd / np.sqrt(ref.tau) - (xd * xd * ref.D[0]).sum() / (2 * ref.tau)
            m = e.max()
            f = np.exp(e - m) / np.sqrt(ref.r)
            den = max(f @ f, ref.beta * np.exp(-2 * m)) if np.isfinite(np.exp(-2 * m)) else np.inf
            want = (f @ f) * v[0].astype(np.float64) / den
            got = rt.prf_run(0, x, v)[0]
            assert np.all(np.isfinite(got)), scale
            # A floored denominator makes out depend on exp(2 m): the runtime's D (recovered from
            # prf_W, ~1e-8 relative) moves m by about 1e-8 of x^T D x / (2 tau).
            tol = 1e-4 + 4e-7 * (xd * xd * ref.D[0]).sum() / (2 * ref.tau)
            np.testing.assert_allclose(got, want, rtol=tol, atol=1e-30)


def _cuckoo_items(blob: bytes):
    """Every (key, value bits) of a cuckoo table, from docs/format.md "Cuckoo table"."""
    d, b, S = struct.unpack_from("<3I", blob, 4)
    nb, salt, items = struct.unpack_from("<3Q", blob, 16)
    stash_count, em_used = struct.unpack_from("<2I", blob, 40)
    em_key, = struct.unpack_from("<Q", blob, 48)
    em_val, = struct.unpack_from("<I", blob, 56)
    al = lambda n: (n + 7) // 8 * 8
    occ = np.frombuffer(blob, np.uint8, nb, 64)
    k0 = 64 + al(nb)
    keys = np.frombuffer(blob, "<u8", nb * b, k0)
    vals = np.frombuffer(blob, "<u4", nb * b, k0 + 8 * nb * b)
    s0 = k0 + 8 * nb * b + al(4 * nb * b)
    skeys = np.frombuffer(blob, "<u8", S, s0)
    svals = np.frombuffer(blob, "<u4", S, s0 + 8 * S)
    used = ((occ[:, None] >> np.arange(b)) & 1).astype(bool).reshape(-1)
    out = list(zip(keys[used].tolist(), vals[used].tolist()))
    out += list(zip(skeys[:stash_count].tolist(), svals[:stash_count].tolist()))
    if em_used:
        out.append((em_key, em_val))
    assert len(out) == items
    return out


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_ffn_against_numpy(gens, name):
    root, _ = gens[name]
    with stk.Generation(root) as gen:
        rt = ReferenceRuntime(gen)
        d, units = rt.d_model, rt.n_ffn_units
        M = np.zeros((units, 2, d, d), dtype=np.float32)  # [unit, sign, i, j]
        seen = set()
        delta = _cuckoo_items(bytes(np.asarray(gen.arrays["cuckoo_delta.bin"])))
        base_keys = np.asarray(gen.arrays["linear_keys.bin"]).view("<u8").reshape(-1)
        base_vals = np.asarray(gen.arrays["linear_weights.bin"])
        for k, v in [(k, np.uint32(v).view(np.float32)) for k, v in delta] + list(zip(base_keys.tolist(), base_vals)):
            u, s, i, j = (k >> 48) & 0x7FFF, k >> 63, (k >> 24) & 0xFFFFFF, k & 0xFFFFFF
            M[u, s, i, j] = v  # base last: a key in both reads as its base value (the lookup's order)
            seen.add(k)
        assert rt.info.ffn_entries == len(base_keys) + len(delta)
        rng = np.random.default_rng(3)
        X = rng.standard_normal((6, d)).astype(np.float32)
        X[0, ::3] = 0  # zeros and a negative zero
        X[0, 1] = -0.0
        for u in range(units):
            got = rt.ffn_apply(u, X)
            for t in range(X.shape[0]):
                acc = np.zeros(d)
                for j in range(d):  # j ascending, double products, one rounding
                    x = X[t, j]
                    if x == 0:
                        continue
                    acc += abs(float(x)) * M[u, int(np.signbit(x)), :, j].astype(np.float64)
                assert np.array_equal(got[t], acc.astype(np.float32)), f"{name} unit {u} token {t}"
        bias = rt.ffn_bias()
        if rt.has_linear_bias:
            assert np.array_equal(bias, np.asarray(gen.arrays["linear_bias.bin"]))
        else:
            assert bias is None and "linear_bias.bin" not in gen.arrays


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_memory_against_numpy(gens, name):
    root, _ = gens[name]
    with stk.Generation(root) as gen:
        rt = ReferenceRuntime(gen)
        coeff = np.asarray(gen.arrays["memory_coeff.bin"], dtype=np.float64)
        assert rt.memory_sections == coeff.shape[0]
        u = np.random.default_rng(5).standard_normal(50).astype(np.float32)
        got = rt.memory_run(u)
        s1 = np.zeros(len(coeff))
        s2 = np.zeros(len(coeff))
        for t in range(len(u)):
            total = comp = 0.0
            for k, (b0, b1, a1, a2) in enumerate(coeff):  # DF-II-T, Kahan over sections in row order
                y = b0 * float(u[t]) + s1[k]
                s1[k] = b1 * float(u[t]) + a1 * y + s2[k]
                s2[k] = a2 * y
                tt = y - comp
                nx = total + tt
                comp = (nx - total) - tt
                total = nx
            assert got[t] == np.float32(total), t


def test_refusals(gens):
    root, _ = gens["gpt2"]
    with stk.Generation(root) as gen:
        rt = ReferenceRuntime(gen)
        with pytest.raises(stk.StkError) as e:
            rt.prf_run(rt.n_layers, np.zeros((1, rt.d_model)), np.zeros((1, rt.d_v)))
        assert e.value.status_name == "STK_E_INVALID_ARGUMENT" and f"layer {rt.n_layers}" in e.value.message
        with pytest.raises(stk.StkError) as e:
            rt.ffn_apply(rt.n_ffn_units, np.zeros((1, rt.d_model)))
        assert "FFN units" in e.value.message
        with pytest.raises(ValueError):
            rt.overlay_delta(0, np.zeros((2, rt.d_model + 1)))
