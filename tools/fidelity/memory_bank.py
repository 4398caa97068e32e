#!/usr/bin/env python3
"""Score published memory banks against the RoPE kernel of a model's real activations.

    python tools/fidelity/memory_bank.py --model HF_DIR --energies results.json|cache.pkl \
        --bank NAME=ROOT [--bank NAME=ROOT ...] [--json OUT]

The energies are fidelity.py's per-layer rotary-pair energies of the real pre-RoPE q, k
(results.json's memory.pair_energy_per_layer, or the pair_e of a --cache file; for a model with
one RoPE base the layer sum, pair_energy_activations, is enough). The targets are
fidelity.py's: the kernel of the layers that use the global base (what memory_fit fits), and on
a model with a second base (Gemma's sliding layers) those layers with their own base and every
layer with its own.  Each bank's impulse response (DF-II-T, as src/runtime/memory_step.h) is
scored by cosine and relative L2 over 32 and 512 steps; its bytes are memory_coeff.bin's payload.
"""
import argparse
import json
import os
import pickle
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refmodel  # noqa: E402
import sera_arrays as sa  # noqa: E402
from fidelity import cos_rel, sos_response  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', required=True)
    ap.add_argument('--energies', required=True)
    ap.add_argument('--bank', action='append', required=True, help='NAME=GENERATIONS_ROOT')
    ap.add_argument('--json')
    a = ap.parse_args()
    m = refmodel.Model(a.model)
    if a.energies.endswith('.json'):
        mem = json.load(open(a.energies))['memory']
        pe = np.array(mem.get('pair_energy_per_layer', mem['pair_energy_activations']))
    else:
        pe = np.asarray(pickle.load(open(a.energies, 'rb'))['pair_e'])
    if pe.ndim == 1 and len(set(m.layer_types)) == 1:
        # energies summed over layers (an earlier results.json): enough where every layer has one base
        pe = np.vstack([pe] + [np.zeros_like(pe)] * (m.L - 1))
    if pe.ndim != 2 or pe.shape[0] != m.L:
        raise SystemExit(f'{a.energies}: per-layer pair energies [{m.L}, {m.hd // 2}] expected, found shape {pe.shape}')
    glob = [l for l in range(m.L) if m.layer_types[l] != 'sliding_attention']
    loc = [l for l in range(m.L) if m.layer_types[l] == 'sliding_attention']

    def kernel(layers, n):
        t = np.arange(n)
        num = sum((pe[l][None, :] * np.cos(np.outer(t, m.layer_inv_freq(l).numpy()))).sum(1) for l in layers)
        return num / sum(pe[l].sum() for l in layers)
    targets = {f'global layers, base {m.rope_theta:g}': glob}
    if loc:
        targets[f'sliding layers, base {m.rope_local_theta:g}'] = loc
        targets['every layer, its own base'] = list(range(m.L))
    out = {}
    hdr = '| bank | sections | bytes | ' + ' | '.join(f'{t}: cos 32 / relL2 32 / cos 512 / relL2 512' for t in targets) + ' |'
    print(hdr)
    print('|---|---:|---:|' + '---:|' * len(targets))
    for spec in a.bank:
        name, root = spec.split('=', 1)
        coeff = sa.read_array(root, 'memory_coeff.bin')
        row = {}
        cells = []
        for t, layers in targets.items():
            s = {}
            for n in (32, 512):
                s[n] = cos_rel(sos_response(coeff, n), kernel(layers, n))
            row[t] = s
            cells.append(f'{s[32][0]:.4f} / {s[32][1]:.4f} / {s[512][0]:.4f} / {s[512][1]:.4f}')
        nbytes = sa.array_bytes(root, 'memory_coeff.bin') - 128
        out[name] = dict(sections=int(coeff.shape[0]), bytes=nbytes, coeff=coeff.tolist(), scores=row)
        print(f'| {name} | {coeff.shape[0]} | {nbytes} | ' + ' | '.join(cells) + ' |')
    if a.json:
        json.dump(out, open(a.json, 'w'), indent=1)


if __name__ == '__main__':
    main()
