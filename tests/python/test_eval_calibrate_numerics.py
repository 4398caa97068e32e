"""The arithmetic `stk eval` scores with and `stk calibrate` sums with (issue 38 item 4), against
numpy written from the definitions in float64: the scores' one-exp form (NLL = log sum exp - x,
KL = sum p_o (lo - ls) - (Z_o - Z_s)) against log_softmax's textbook form; the moments' float32
GEMMs over row blocks against float64 products, on random data and on the tiny Llama's whole
statistics file; the crc32c by 32-bit words against CRC32C's bitwise definition."""
import numpy as np

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
    a = rng.standard_normal((2500, 37)).astype(np.float32)
    b = rng.standard_normal((2500, 11)).astype(np.float32)
    l64 = rng.standard_normal(2500)
    a64 = a.astype(np.float64)
    for block in (7, 1024, 4096):  # many blocks, a short last one, one block
        g = calibration.gram(a, block)
        assert g.dtype == np.float64
        want = a64.T @ a64
        assert np.abs(g - want).max() <= 1e-6 * np.abs(want).max()
        want = a64.T @ b.astype(np.float64)
        assert np.abs(calibration.cross(a, b, block) - want).max() <= 1e-6 * np.abs(want).max()
        want = a64.T @ l64  # a float64 right-hand side is rounded to float32 for the product
        assert np.abs(calibration.cross(a, l64, block) - want).max() <= 1e-6 * np.abs(want).max()


def test_calibrate_float32_moments_against_float64(tmp_path, text, monkeypatch):
    a, b = tmp_path / "f32.stats", tmp_path / "f64.stats"
    ra = stk.calibrate(str(TINY_LLAMA), [text], str(a), ctx=48, contexts=3, progress=False)
    monkeypatch.setattr(calibration, "gram", lambda x, block=0: np.asarray(x, np.float64).T @ np.asarray(x, np.float64))
    monkeypatch.setattr(calibration, "cross",
                        lambda x, y, block=0: np.asarray(x, np.float64).T @ np.asarray(y, np.float64))
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
