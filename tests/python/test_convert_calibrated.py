"""stk convert --calibration (stk.convert(..., calibration=STATS)) on tests/fixtures/eval/tiny-llama
with statistics stk.calibrate wrote, checked against numpy fits written here from docs/decisions.md
("Calibrated fits") and the STATS layout of docs/format.md ("Calibration statistics"), not from the
library: the FFN dictionary's values (every key of the data-free generation, read back through
the published MPHF and cuckoo table), the overlay basis U, and the PRF whitener D (from prf_W's
column energies: the Gaussians are the data-free generation's), each also against the manifest's
records of the fit."""
import struct

import numpy as np
import pytest
from safetensors.numpy import load_file

import stk
from stk.errors import StkError
from conftest import SOURCE_ROOT

TINY_LLAMA = SOURCE_ROOT / "tests" / "fixtures" / "eval" / "tiny-llama"
R, RV = 16, 4


def read_stats(path):
    b = open(path, "rb").read()
    L, d, dv, npairs = struct.unpack_from("<4I", b, 28)
    layers, off = [], 128 + 16 * L
    take = lambda n: np.frombuffer(b, "<f8", n, off)  # noqa: E731
    for l in range(L):
        sec, _, _pairs = struct.unpack_from("<IIQ", b, 128 + 16 * l)
        lay = {}
        if sec & 1:
            n = d * (d + 1) // 2
            lay["prf_m"], lay["prf_b"], lay["prf_l"] = unpack(take(n), d), take(n + d)[n:], take(n + d + 2)[n + d:]
            off += 8 * (n + d + 2)
        if sec & 2:
            n = dv * (dv + 1) // 2
            lay["C"] = unpack(take(n), dv)
            off += 8 * n
        if sec & 4:
            lay["rope"] = take(npairs).copy()
            off += 8 * npairs
        if sec & 8:
            n2 = 2 * d
            ng = n2 * (n2 + 1) // 2
            v = take(ng + n2 * d + d)
            lay["G"], lay["X"], lay["yy"] = unpack(v[:ng], n2), v[ng:ng + n2 * d].reshape(n2, d), v[ng + n2 * d:]
            off += 8 * (ng + n2 * d + d)
        layers.append(lay)
    assert off == len(b)
    return (L, d, dv, npairs), layers


def unpack(p, n):
    a = np.zeros((n, n))
    k = 0
    for i in range(n):
        a[i, i:] = p[k:k + n - i]
        k += n - i
    return np.triu(a) + np.triu(a, 1).T


@pytest.fixture(scope="module")
def gens(tmp_path_factory):
    d = tmp_path_factory.mktemp("calconv")
    text = d / "prose.txt"
    text.write_text("the then in hello there, the thin thing in the heather. " * 40, encoding="utf-8")
    stats = d / "tiny.stats"
    stk.calibrate(str(TINY_LLAMA), [str(text)], str(stats), ctx=48, contexts=3, progress=False)
    kw = dict(r=R, rv=RV, allow_uncertified_tokenizer=True)
    stk.convert(TINY_LLAMA, d / "free", **kw)
    stk.convert(TINY_LLAMA, d / "cal", calibration=stats, **kw)
    free, cal = stk.Generation(d / "free"), stk.Generation(d / "cal")
    yield stats, free, cal
    free.close()
    cal.close()


def records(gen, prefix):
    return [r for r in gen.manifest["records"] if r["text"].startswith(prefix)]


def test_ffn_values_are_the_least_squares_fit(gens):
    stats, free, cal = gens
    (L, d, _, _), layers = read_stats(stats)
    free_rel, fit_rel = [], []
    for u in range(L):
        G, X, yy = layers[u]["G"], layers[u]["X"], layers[u]["yy"]
        e_fit = e_free = 0.0
        for i in range(d):
            keys, zs, m0 = [], [], []
            for s in (0, 1):
                for j in range(d):
                    key = (s << 63) | (u << 48) | (i << 24) | j
                    try:
                        v = free.linear(key)
                    except StkError:
                        continue
                    keys.append(key)
                    zs.append(s * d + j)
                    m0.append(v)
            A = G[np.ix_(zs, zs)]
            lam = 1e-4 * np.mean(np.diag(A)) if np.mean(np.diag(A)) > 0 else 1.0
            m = np.linalg.solve(A + lam * np.eye(len(zs)), X[zs, i])
            got = np.array([cal.linear(k) for k in keys])
            np.testing.assert_allclose(got, m, rtol=1e-4, atol=1e-6 * max(1.0, np.abs(m).max()))
            err = lambda v: yy[i] - 2 * v @ X[zs, i] + v @ A @ v  # noqa: E731
            e_fit += max(err(got), 0.0)
            e_free += max(err(np.array(m0)), 0.0)
        fit_rel.append(np.sqrt(e_fit / yy.sum()))
        free_rel.append(np.sqrt(e_free / yy.sum()))
    print("FFN rel L2 on the moments, fitted", fit_rel, "data-free", free_rel)
    rec = records(cal, "calibrated FFN L")
    assert len(rec) == L
    for u, r in enumerate(rec):
        assert r["value"] == pytest.approx(fit_rel[u], rel=1e-6, abs=1e-9)
        assert r["bound"] == pytest.approx(free_rel[u], rel=1e-6, abs=1e-9)
        assert fit_rel[u] < free_rel[u]


def test_overlay_basis_is_the_best_weighted_candidate(gens):
    stats, free, cal = gens
    (L, dm, dv, _), layers = read_stats(stats)
    w = load_file(str(TINY_LLAMA / "model.safetensors"))
    Uf, Uc = free.arrays["overlays_U.bin"], cal.arrays["overlays_U.bin"]
    for l in range(L):
        W = w[f"model.layers.{l}.self_attn.o_proj.weight"].astype(np.float64)
        C = layers[l]["C"]
        ev, Q = np.linalg.eigh(C)
        S = Q @ np.diag(np.sqrt(np.maximum(ev, 0))) @ Q.T
        _, mv = np.linalg.eigh(S @ W.T @ W @ S)
        V = mv[:, ::-1][:, :RV].copy()
        for c in range(RV):
            if V[np.argmax(np.abs(V[:, c])), c] < 0:
                V[:, c] *= -1
        Ua, Rr = np.linalg.qr(S @ V)
        Ua = Ua * np.sign(np.diag(Rr))
        total = np.trace(W @ C @ W.T)

        def err(U):
            P = np.eye(dv) - U @ U.T
            return np.trace(W @ P @ C @ P @ W.T) / total
        cands = [Uf[l].astype(np.float64), Ua, V]
        errs = [err(U) for U in cands]
        best = int(np.argmin(errs))
        np.testing.assert_allclose(Uc[l], cands[best], atol=2e-5)
        print(f"overlay L{l}: projection error data-free {errs[0]:.4f}, range {errs[1]:.4f}, eigen {errs[2]:.4f}")
        r = records(cal, f"calibrated L{l}: projection error")[0]
        assert r["value"] == pytest.approx(errs[best], rel=1e-4)
        assert r["bound"] == pytest.approx(errs[0], rel=1e-4)


def test_prf_whitener_is_the_clamped_least_squares_fit(gens):
    stats, free, cal = gens
    (L, d, _, _), layers = read_stats(stats)
    w = load_file(str(TINY_LLAMA / "model.safetensors"))
    tau = np.sqrt(16.0)  # head_dim 16
    Pf, Pc = free.arrays["prf_W.bin"].astype(np.float64), cal.arrays["prf_W.bin"].astype(np.float64)
    for l in range(L):
        Wk = w[f"model.layers.{l}.self_attn.k_proj.weight"].astype(np.float64)
        dfree = np.maximum((Wk ** 2).mean(0), 1e-8)
        M, b, el = layers[l]["prf_m"], layers[l]["prf_b"], layers[l]["prf_l"]
        lam = 1e-6 * np.mean(np.diag(M))
        Mr, lo, hi = M + lam * np.eye(d), 1e-8, tau / 2
        var = el[1] - el[0] ** 2
        r2 = lambda x: 1 - ((x / tau) @ M @ (x / tau) - 2 * (x / tau) @ b + el[1]) / var  # noqa: E731
        # prf_W = f32(g sqrt(D)) with the same g: column energies scale by D / D_free.
        got = dfree * (Pc[l] ** 2).sum(0) / (Pf[l] ** 2).sum(0)
        r = records(cal, f"calibrated whitener L{l}: R^2")[0]
        print(f"PRF L{l}: R^2 fitted {r['value']:.4f}, data-free {r2(dfree):.4f}, unconstrained "
              f"{r2(np.linalg.solve(Mr, tau * b)):.4f}")
        assert r["bound"] == pytest.approx(r2(dfree), rel=1e-6, abs=1e-9)
        if r["value"] <= r["bound"]:  # no gain: the data-free diagonal stays
            np.testing.assert_allclose(got, dfree, rtol=2e-5)
            continue
        # Fitted: D is the minimiser of the strictly convex D^T Mr D - 2 tau b^T D on the box
        # [1e-8, tau/2], i.e. it meets the KKT conditions: zero gradient inside, pointing out at
        # a bound (tolerances for D read back from f32 prf_W).
        D = np.clip(got, lo, hi)
        at_lo, at_hi = got <= lo * 1.001, got >= hi * 0.999
        g = Mr @ D - tau * b
        scale = np.abs(Mr) @ np.abs(D) + np.abs(tau * b)
        assert np.all(np.abs(g[~at_lo & ~at_hi]) <= 1e-3 * scale[~at_lo & ~at_hi])
        assert np.all(g[at_lo] >= -1e-3 * scale[at_lo]) and np.all(g[at_hi] <= 1e-3 * scale[at_hi])
        assert r["value"] == pytest.approx(r2(D), rel=1e-3, abs=1e-6)
        assert r2(D) >= r2(np.clip(np.linalg.solve(Mr, tau * b), lo, hi)) - 1e-9


def test_manifest_names_the_statistics(gens):
    import hashlib
    stats, _, cal = gens
    b = open(stats, "rb").read()
    r = records(cal, "calib sha256 ")
    assert len(r) == 1 and r[0]["text"] == f"calib sha256 {hashlib.sha256(b[128:]).hexdigest()}; value = tokens"
    assert r[0]["value"] == struct.unpack_from("<Q", b, 48)[0]
    mem = records(cal, "calibrated: bank vs the activations' RoPE kernel")
    assert len(mem) == 1 and 0 < mem[0]["value"] <= 1
    print("memory cosine over 512 steps", mem[0]["value"])


def test_cli_summary_names_the_statistics(gens, tmp_path):
    """`stk convert --calibration STATS` says so: the summary (stderr) and the --json object name
    the statistics file and its SHA-256 (hashlib over bytes 128.. of the file, docs/format.md) and
    token count (the header's u64 at 48); a data-free convert says nothing of calibration."""
    import hashlib
    import json
    import subprocess
    from stk import _lib
    stats = gens[0]
    b = open(stats, "rb").read()
    sha, tokens = hashlib.sha256(b[128:]).hexdigest(), struct.unpack_from("<Q", b, 48)[0]
    base = [_lib.binary_path(), "convert", str(TINY_LLAMA), "--r", str(R), "--rv", str(RV), "--allow-uncertified-tokenizer"]
    p = subprocess.run(base + [str(tmp_path / "text"), "--calibration", str(stats)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    want = f"  calibration {stats} (sha256 {sha}, {tokens} tokens): the stages fitted to these statistics"
    assert any(line.startswith("  calibration ") for line in p.stderr.splitlines()), p.stderr
    assert " ".join(want.split()) in " ".join(p.stderr.split()), p.stderr  # wrap() breaks lines at spaces
    p = subprocess.run(base + [str(tmp_path / "json"), "--calibration", str(stats), "--json"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["calibration"] == {"file": str(stats), "sha256": sha, "tokens": tokens}
    p = subprocess.run(base + [str(tmp_path / "free"), "--json"], capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["calibration"] is None, p.stderr
    assert "calibration" not in p.stderr
