"""The arithmetic `stk eval` scores with and `stk calibrate` sums with (issue 38 item 4), against
numpy written from the definitions in float64: the scores' one-exp form (NLL = log sum exp - x,
KL = sum p_o (lo - ls) - (Z_o - Z_s)) against log_softmax's textbook form; the moments' float32
GEMMs over row blocks and the PRF pairs' weighted sum against float64 products and every pair
(and against the mean of the random draws it replaces), on random data and on the tiny Llama's whole
statistics file; the crc32c by 32-bit words against CRC32C's bitwise definition."""
import numpy as np
import pytest

import stk
from stk import calibration
from stk.evaluation import _Scores
from conftest import TINY_LLAMA  # `text`: conftest's prose
from calib_stats_reference import crc32c as crc32c_ref
from test_calibrate import _read

F32_MOMENT_TOL = 1e-5  # |float32 blocks - float64| / max |float64| per section (measured: 5e-7 on SmolLM2)


def _log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def test_scores_against_log_softmax():
    rng = np.random.default_rng(3)
    t, v = 41, 997
    lo = (rng.standard_normal((t, v)) * 4).astype(np.float32)
    ls = (lo + rng.standard_normal((t, v)) * 0.7).astype(np.float32)
    ls[5] = lo[5]  # one position where the swap changed nothing: KL exactly 0
    ids = rng.integers(0, v, t).tolist()
    s = _Scores()
    s.add(ids, lo, ls, rows=16)  # 41 rows: three blocks, the last short
    po, ps = _log_softmax(lo), _log_softmax(ls)
    at = np.arange(t - 1)
    np.testing.assert_allclose(s.nll_o[0], -po[at, ids[1:]], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.nll_s[0], -ps[at, ids[1:]], rtol=1e-12, atol=1e-12)
    kl = (np.exp(po) * (po - ps)).sum(-1)
    np.testing.assert_allclose(s.kl[0], kl, rtol=1e-10, atol=1e-13)
    assert s.kl[0][5] == 0.0
    assert (s.agree[0] == (lo.argmax(-1) == ls.argmax(-1))).all()


def test_gram_and_cross_blocks_against_float64():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2500, 37)).astype(np.float32)  # three blocks of rows, the last short
    b = rng.standard_normal((2500, 11)).astype(np.float32)
    a64 = a.astype(np.float64)
    for threads in (1, 2):
        g = np.full((37, 37), -3.0)
        calibration.gram(g, a, threads)
        want = a64.T @ a64 - 3.0
        iu = np.triu_indices(37)
        assert np.abs(g[iu] - want[iu]).max() <= 1e-6 * np.abs(want).max()
        assert (g[np.tril_indices(37, -1)] == -3.0).all()  # the lower triangle is left as it is
        x = np.zeros((37, 11))
        calibration.cross(x, a, b, threads)
        want = a64.T @ b.astype(np.float64)
        assert np.abs(x - want).max() <= 1e-6 * np.abs(want).max()
    with pytest.raises(ValueError):
        calibration.gram(np.zeros((37, 37), np.float32), a)  # a float32 accumulator is refused


def _pairs_brute(x, q, k, scale, w):
    """Every pair (t, s <= t) in float64, one at a time: the definition in stk.h."""
    x, q, k = (np.asarray(v, np.float64) for v in (x, q, k))
    t_len, d = x.shape
    m, b, l1, l2 = np.zeros((d, d)), np.zeros(d), 0.0, 0.0
    for t in range(t_len):
        for s in range(t + 1):
            p = x[t] * x[s]
            lg = scale * float(q[t] @ k[s])
            m += w[t] * np.outer(p, p)
            b += w[t] * p * lg
            l1 += w[t] * lg
            l2 += w[t] * lg * lg
    return m, b, np.array([l1, l2])


def test_causal_pairs_against_every_pair_and_the_draws():
    rng = np.random.default_rng(9)
    t_len, d, dq, ppq = 60, 13, 9, 16
    x = rng.standard_normal((t_len, d)).astype(np.float32)
    q = rng.standard_normal((t_len, dq)).astype(np.float32)
    k = rng.standard_normal((t_len, dq)).astype(np.float32)
    w = calibration.pair_weights(t_len, ppq)
    assert np.allclose(w[:ppq], 1.0) and w[ppq] == ppq / (ppq + 1)
    assert calibration.pair_count(t_len, ppq) == ppq * (ppq + 1) // 2 + (t_len - ppq) * ppq
    want_m, want_b, want_l = _pairs_brute(x, q, k, 0.25, w)
    iu = np.triu_indices(d)
    for threads in (1, 2):
        m, b, lsum = np.zeros((d, d)), np.zeros(d), np.zeros(2)
        calibration.causal_pairs(m, b, lsum, x, q, k, 0.25, w, threads)
        assert np.abs(m[iu] - want_m[iu]).max() <= 1e-12 * np.abs(want_m).max()
        assert np.abs(b - want_b).max() <= 1e-5 * np.abs(want_b).max()
        assert np.abs(lsum - want_l).max() <= 1e-5 * want_l[1]
    # The weighted sum is the expectation of the sums over ppq keys drawn uniformly from 0..t
    # per query (the draws stk calibrate made before): the mean of 4,000 draws within 4
    # standard errors of it, entry by entry.
    xs, lg = x.astype(np.float64), 0.25 * (q.astype(np.float64) @ k.astype(np.float64).T)
    draws = []
    for _ in range(4000):
        ts, ss = [], []
        for t in range(t_len):
            s = np.arange(t + 1) if t + 1 <= ppq else rng.integers(0, t + 1, size=ppq)
            ts += [t] * len(s)
            ss += list(s)
        ts, ss = np.array(ts), np.array(ss)
        p = xs[ts] * xs[ss]
        draws.append(np.concatenate([(p.T @ p)[iu], p.T @ lg[ts, ss]]))
    draws = np.array(draws)
    mean, se = draws.mean(0), draws.std(0) / np.sqrt(len(draws))
    exact = np.concatenate([want_m[iu], want_b])
    z = np.abs(mean - exact) / np.maximum(se, 1e-300)
    print(f"causal pairs: the draws' mean against the weighted sum, max |z| {z.max():.2f} over {z.size} entries")
    assert z.max() <= 4.5


def _gram64(acc, a, threads=1):
    a = np.asarray(a, np.float64)
    acc += a.T @ a


def _cross64(acc, a, b, threads=1):
    acc += np.asarray(a, np.float64).T @ np.asarray(b, np.float64)


def _pairs64(acc_m, acc_b, acc_l, x, q, k, scale, w, threads=1):
    x, q, k = (np.asarray(v, np.float64) for v in (x, q, k))
    lg = np.tril(scale * (q @ k.T))
    acc_b += (w[:, None] * x * (lg @ x)).sum(0)
    acc_l += [(w * lg.sum(1)).sum(), (w * (lg * lg).sum(1)).sum()]
    c = np.zeros_like(acc_m)
    for t in range(x.shape[0]):
        p = np.outer(x[t], x[t])
        c += p
        acc_m += w[t] * p * c


def test_calibrate_float32_moments_against_float64(tmp_path, text, monkeypatch):
    a, b = tmp_path / "f32.stats", tmp_path / "f64.stats"
    ra = stk.calibrate(str(TINY_LLAMA), [text], str(a), ctx=48, contexts=3, progress=False)
    monkeypatch.setattr(calibration, "gram", _gram64)
    monkeypatch.setattr(calibration, "cross", _cross64)
    monkeypatch.setattr(calibration, "causal_pairs", _pairs64)
    rb = stk.calibrate(str(TINY_LLAMA), [text], str(b), ctx=48, contexts=3, progress=False)
    assert ra["sections"] == rb["sections"] and ra["tokens"] == rb["tokens"]
    _, _, la = _read(a)
    _, _, lb = _read(b)
    worst = 0.0
    for x, y in zip(la, lb):
        for key in ("M", "b", "l", "C", "e", "G", "X", "yy"):
            if key in y:
                worst = max(worst, float(np.abs(x[key] - y[key]).max() / max(np.abs(y[key]).max(), 1e-300)))
    print(f"calibrate tiny-llama: float32 blocks against float64, max relative difference {worst:.3g}")
    assert worst <= F32_MOMENT_TOL


def test_crc32c_words_against_definition():
    rng = np.random.default_rng(11)
    data = rng.integers(0, 256, 3 * 1024 * 7 + 5, dtype=np.uint8).tobytes()  # 21 chunks and a tail
    want = crc32c_ref(data)
    assert calibration.crc32c(data) == want
    for cut in (1, 1023, 4096, 9999):
        assert calibration.crc32c(data[cut:], calibration.crc32c(data[:cut])) == want
