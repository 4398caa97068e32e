#!/usr/bin/env python3
"""The calibrated fits recomputed with numpy from docs/decisions.md "Calibrated fits", for
tests/test_calib_fit.cc: writes tests/calib_fit_expected.h (moments and the expected results).

Moments come from seeded random samples (so G, M are genuine means of outer products); the
expected values are numpy's dense solves (np.linalg.solve), not the library's Cholesky.

    python3 tools/calib/fit_reference.py > tests/calib_fit_expected.h
"""
import numpy as np


def packed(a):
    """Row i holds columns i..n-1 (src/format/calib_stats.h)."""
    n = a.shape[0]
    return np.concatenate([a[i, i:] for i in range(n)])


def arr(name, v, ctype="double"):
    v = np.asarray(v).ravel()
    body = ", ".join(repr(float(x)) if ctype == "double" else str(int(x)) for x in v)
    return f"static const {ctype} {name}[{len(v)}] = {{{body}}};\n"


def ffn(out):
    rng = np.random.default_rng(30)
    d, T = 4, 400
    x = rng.standard_normal((T, d))
    W = rng.standard_normal((d, 2 * d))
    z = np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=1)  # [relu(x); relu(-x)]
    y = z @ W.T + 0.3 * np.tanh(x) + 0.05 * rng.standard_normal((T, d))
    G, X, yy = z.T @ z / T, z.T @ y / T, (y * y).mean(0)
    # The entries of each output (z indices) and data-free values m0.
    sets = [[0, 1, 5], [2, 3, 4, 6, 7], [1], [0, 1, 2, 3, 4, 5, 6, 7]]
    m0 = [rng.standard_normal(len(s)) for s in sets]
    out.append(f"constexpr unsigned kFfnD = {d};\n")
    out.append(arr("kFfnG", packed(G)) + arr("kFfnX", X) + arr("kFfnYY", yy))
    out.append(arr("kFfnSetLen", [len(s) for s in sets], "unsigned"))
    out.append(arr("kFfnSets", np.concatenate(sets), "unsigned"))
    out.append(arr("kFfnM0", np.concatenate(m0)))
    ms, ef, e0 = [], [], []
    for i, s in enumerate(sets):
        A = G[np.ix_(s, s)]
        lam = 1e-4 * np.mean(np.diag(A))
        m = np.linalg.solve(A + lam * np.eye(len(s)), X[s, i])
        ms.append(m)
        err = lambda v: yy[i] - 2 * v @ X[s, i] + v @ A @ v
        ef.append(err(m))
        e0.append(err(m0[i]))
        # The same error from the samples (the moments are exact means): a check of the formula.
        assert abs(err(m) - np.mean((y[:, i] - z[:, s] @ m) ** 2)) < 1e-9
    out.append(arr("kFfnM", np.concatenate(ms)) + arr("kFfnErr", ef) + arr("kFfnErr0", e0))


def prf(out):
    rng = np.random.default_rng(31)
    d, T, tau = 6, 800, 2.0
    x, yv = rng.standard_normal((T, d)), rng.standard_normal((T, d))
    Dtrue = np.array([0.5, 0.2, 0.0, -0.3, 1.9, 0.05])  # one negative (clamped up), one above upper
    w = x * yv
    l = w @ Dtrue / tau + 0.1 * rng.standard_normal(T)
    M, b, el = w.T @ w / T, w.T @ l / T, np.array([l.mean(), (l * l).mean()])
    upper = 1.0
    dfree = np.full(d, 0.1)
    lam = 1e-6 * np.mean(np.diag(M))
    Mr = M + lam * np.eye(d)
    D = np.linalg.solve(Mr, tau * b)
    var = el[1] - el[0] ** 2
    err = lambda v: (v / tau) @ M @ (v / tau) - 2 * (v / tau) @ b + el[1]
    r2u = 1 - err(D) / var
    # The box-constrained minimiser by cyclic coordinate descent (exact per coordinate; converges
    # for a positive definite Mr), not the library's active set.
    Dc = np.clip(D, 1e-8, upper)
    for _ in range(20000):
        for a in range(d):
            Dc[a] = np.clip((tau * b[a] - Mr[a] @ Dc + Mr[a, a] * Dc[a]) / Mr[a, a], 1e-8, upper)
    neg, high = int((Dc <= 1e-8).sum()), int((Dc >= upper).sum())
    out.append(f"constexpr unsigned kPrfD = {d};\nconstexpr double kPrfTau = {tau!r}, kPrfUpper = {upper!r};\n")
    out.append(arr("kPrfM", packed(M)) + arr("kPrfB", b) + arr("kPrfEl", el) + arr("kPrfDfree", dfree))
    out.append(arr("kPrfDexp", Dc))
    out.append(f"constexpr double kPrfR2 = {float(1 - err(Dc) / var)!r}, kPrfR2Free = {float(1 - err(dfree) / var)!r}, "
               f"kPrfR2Unclamped = {float(r2u)!r};\nconstexpr unsigned kPrfNegative = {neg}, kPrfHigh = {high};\n")


def overlay(out):
    rng = np.random.default_rng(32)
    dm, dv, rv, T = 6, 5, 2, 300
    W = rng.standard_normal((dm, dv))
    o = rng.standard_normal((T, dv)) @ np.diag([3.0, 1.0, 0.5, 0.2, 0.05]) @ rng.standard_normal((dv, dv))
    C = o.T @ o / T
    Ufree, _ = np.linalg.qr(rng.standard_normal((dv, rv)))
    w, Q = np.linalg.eigh(C)
    S = Q @ np.diag(np.sqrt(np.maximum(w, 0))) @ Q.T
    mw, mv = np.linalg.eigh(S @ W.T @ W @ S)
    V = mv[:, ::-1][:, :rv].copy()
    for c in range(rv):  # the largest-magnitude entry positive
        if V[np.argmax(np.abs(V[:, c])), c] < 0:
            V[:, c] *= -1
    Ua, R = np.linalg.qr(S @ V)
    Ua = Ua * np.sign(np.diag(R))  # R's diagonal non-negative
    total = np.trace(W @ C @ W.T)
    def err(U):
        P = np.eye(dv) - U @ U.T
        return np.trace(W @ P @ C @ P @ W.T) / total
    errs = [err(Ufree), err(Ua), err(V)]
    choice = int(np.argmin(errs))
    out.append(f"constexpr unsigned kOvDm = {dm}, kOvDv = {dv}, kOvRv = {rv}, kOvChoice = {choice};\n")
    # Column-major U's, row-major W.
    out.append(arr("kOvW", W) + arr("kOvC", packed(C)) + arr("kOvUfree", Ufree.T) + arr("kOvUa", Ua.T) + arr("kOvUb", V.T))
    out.append(arr("kOvErr", errs))


def rope(out):
    rng = np.random.default_rng(33)
    L, npairs, n = 3, 4, 40
    theta = 10000.0 ** (-np.arange(npairs) * 2 / (2 * npairs))
    e = rng.uniform(0.1, 2.0, (L, npairs))
    use = [True, False, True]  # layer 1 has no section
    t = np.arange(n)
    h = sum(e[l, f] * np.cos(theta[f] * t) for l in range(L) if use[l] for f in range(npairs))
    h = h / sum(e[l].sum() for l in range(L) if use[l])
    out.append(f"constexpr unsigned kRopeL = {L}, kRopePairs = {npairs}, kRopeN = {n};\n")
    out.append(arr("kRopeTheta", theta) + arr("kRopeE", e) + arr("kRopeH", h))


def main():
    out = ["// Generated by tools/calib/fit_reference.py (numpy): moments and the calibrated fits' expected\n"
           "// results for tests/test_calib_fit.cc.  Do not edit; rerun the script.\n#pragma once\n\n"]
    ffn(out)
    prf(out)
    overlay(out)
    rope(out)
    print("".join(out), end="")


if __name__ == "__main__":
    main()
