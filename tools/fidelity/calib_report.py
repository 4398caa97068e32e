"""Per-module errors of a generation on held-out moments (issue 30, item 2).

`python -m stk calibrate` run on text the fit never saw gives the moments every bound below needs;
this tool reads that STATS file with its own reader (docs/format.md, "Calibration statistics"),
the generation's arrays, and the model's W_O, and prints per layer:

- ffn: the linear dictionary's relative L2 on the held-out FFN inputs, sqrt(E|y - M z|^2 / E|y|^2)
  = sqrt((tr E[yy] - 2 tr(M X) + tr(M G M^T)) / tr E[yy]), with M = [M+, M-] read through the
  reference runtime (stk_ffn_apply on +e_j and -e_j: every column of the dictionary);
- overlays: the projection error of the overlay basis U on the held-out attention outputs,
  sqrt(tr(W_O (I - P) C (I - P) W_O^T) / tr(W_O C W_O^T)), P = U U^T (docs/decisions.md's 0.84 -> 0.53);
- memory: the cosine between the bank's impulse response and the held-out activations' RoPE
  kernel h(t) = sum_l sum_f e_lf cos(theta_lf t) / sum e over 512 steps.

Usage: calib_report.py --model MODEL --gen ROOT --stats HELDOUT.stkcal [--json OUT]
"""
import argparse
import hashlib
import json
import math
import struct
import sys

import numpy as np

PRF, ATTN_OUT, ROPE, FFN = 1, 2, 4, 8


def packed_to_full(p, n):
    """A packed upper triangle (row i holds columns i..n-1) -> the symmetric [n, n] matrix."""
    m = np.zeros((n, n))
    iu = np.triu_indices(n)
    m[iu] = p
    return m + np.triu(m, 1).T


def read_stats(path):
    """The calibration statistics file, checked as docs/format.md says (magic, version, sizes,
    SHA-256); returns the header fields and per layer a dict of numpy views."""
    data = open(path, 'rb').read()
    if data[:8] != b'STKCAL01':
        raise ValueError(f'{path}: not a calibration statistics file (magic at offset 0)')
    version, flags, low64, crc, L, d, dv, npairs, _, tokens, nbytes = struct.unpack_from('<IIQIIIIIIQQ', data, 8)
    if version == 1:
        raise ValueError(f'{path}: calibration statistics version 1: made by an older `stk calibrate`; rerun it')
    if version != 2 or nbytes != len(data):
        raise ValueError(f'{path}: version {version}, file_bytes {nbytes} for a file of {len(data)}')
    if hashlib.sha256(data[128:]).digest() != data[64:96]:
        raise ValueError(f'{path}: SHA-256 of bytes 128.. does not match the header')
    off = 128 + 16 * L
    layers = []
    f64 = np.dtype('<f8')

    def take(n):
        nonlocal off
        a = np.frombuffer(data, dtype=f64, count=n, offset=off)
        off += 8 * n
        return a
    for l in range(L):
        sections, _, pairs = struct.unpack_from('<IIQ', data, 128 + 16 * l)
        e = {'sections': sections, 'pairs': pairs}
        if sections & PRF:
            e['prf_m'] = take(d * (d + 1) // 2)
            e['prf_b'] = take(d)
            e['prf_l'] = take(2)
        if sections & ATTN_OUT:
            e['attn_out'] = take(dv * (dv + 1) // 2)
        if sections & ROPE:
            e['rope'] = take(npairs)
        if sections & FFN:
            e['ffn_g'] = take(2 * d * (2 * d + 1) // 2)
            e['ffn_x'] = take(2 * d * d).reshape(2 * d, d)
            e['ffn_yy'] = take(d)
        layers.append(e)
    if off != len(data):
        raise ValueError(f'{path}: sections end at {off}, the file at {len(data)}')
    return dict(model_sha256_low64=low64, model_crc32c=crc, n_layers=L, d_model=d, d_v=dv, n_pairs=npairs,
                tokens=tokens, digest=data[64:96].hex(), layers=layers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', required=True)
    ap.add_argument('--gen', required=True)
    ap.add_argument('--stats', required=True, help='moments of held-out text (python -m stk calibrate)')
    ap.add_argument('--json')
    a = ap.parse_args()
    import stk
    from stk import evaluation
    from stk.runtime import ReferenceRuntime
    sys.path.insert(0, __file__.rsplit('/', 1)[0])
    import sera_arrays as sa

    st = read_stats(a.stats)
    m, _ = evaluation._load(a.model)
    L, d, dv = st['n_layers'], st['d_model'], st['d_v']
    out = dict(stats=a.stats.rsplit('/', 1)[-1], stats_digest=st['digest'], tokens=st['tokens'], ffn=[], overlays=[],
               memory=None)
    layers = evaluation._decoder_layers(m)
    with stk.Generation(a.gen) as gen:
        rt = ReferenceRuntime(gen)
        eye = np.eye(d, dtype=np.float32)
        for l, e in enumerate(st['layers']):
            if 'ffn_g' in e and rt.has_linear:
                Mp = rt.ffn_apply(l, eye).astype(np.float64).T       # [d_out, d_in]: column j = M+[:, j]
                Mm = rt.ffn_apply(l, -eye).astype(np.float64).T
                M = np.concatenate([Mp, Mm], axis=1)                 # [d, 2d], z = [relu(x); relu(-x)]
                G = packed_to_full(e['ffn_g'], 2 * d)
                X = e['ffn_x']
                yy = e['ffn_yy'].sum()
                err = yy - 2 * np.einsum('ij,ji->', M, X) + np.einsum('ij,jk,ik->', M, G, M)
                out['ffn'].append(dict(layer=l, rel_l2=math.sqrt(max(err, 0) / yy)))
            if 'attn_out' in e and rt.has_overlays:
                U = sa.read_array(a.gen, 'overlays_U.bin')[l].astype(np.float64)    # [d_v, r_v]
                Wo = layers[l].self_attn.o_proj.weight.detach().double().numpy()     # [d_model, d_v]
                C = packed_to_full(e['attn_out'], dv)
                R = np.eye(dv) - U @ U.T
                num = np.trace(Wo @ R @ C @ R @ Wo.T)
                den = np.trace(Wo @ C @ Wo.T)
                out['overlays'].append(dict(layer=l, projection_rel=math.sqrt(max(num, 0) / den)))
        if rt.has_memory and any('rope' in e for e in st['layers']):
            n = 512
            t = np.arange(n)
            num = np.zeros(n)
            tot = 0.0
            rotary = m.model.rotary_emb
            for l, e in enumerate(st['layers']):
                if 'rope' not in e:
                    continue
                kind = getattr(m.config, 'layer_types', [None] * L)[l]
                inv = getattr(rotary, f'{kind}_inv_freq', None) if kind else None
                inv = (inv if inv is not None else rotary.inv_freq).double().numpy()
                num += (e['rope'][None, :] * np.cos(np.outer(t, inv[:len(e['rope'])]))).sum(1)
                tot += e['rope'].sum()
            target = num / tot
            u = np.zeros(n, dtype=np.float32)
            u[0] = 1
            h = rt.memory_run(u).astype(np.float64)
            out['memory'] = dict(steps=n, cosine=float(h @ target / (np.linalg.norm(h) * np.linalg.norm(target))))
    f = [r['rel_l2'] for r in out['ffn']]
    o = [r['projection_rel'] for r in out['overlays']]
    if f:
        out['ffn_summary'] = dict(median=float(np.median(f)), max=float(max(f)), layers=len(f))
    if o:
        out['overlays_summary'] = dict(median=float(np.median(o)), max=float(max(o)), layers=len(o))
    print(json.dumps({k: v for k, v in out.items() if k not in ('ffn', 'overlays')}, indent=1))
    if a.json:
        json.dump(out, open(a.json, 'w'), indent=1)


if __name__ == '__main__':
    main()
