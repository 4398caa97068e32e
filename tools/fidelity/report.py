#!/usr/bin/env python3
"""Tables (markdown) and PNG curves from fidelity.py's results.json.

    python tools/fidelity/report.py docs/fidelity/NAME     (writes tables.md and *.png there)
"""
import json
import os
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def f(x, n=3):
    return '-' if x is None or (isinstance(x, float) and np.isnan(x)) else f'{x:.{n}f}'


def mib(b):
    return f'{b / 2**20:.1f} MiB'


def main():
    out = sys.argv[1]
    R = json.load(open(os.path.join(out, 'results.json')))
    md = []
    name = R['name']
    s = R['shape']
    md.append(f"Model: {name}: d_model {s['d_model']}, {s['layers']} layers, {s['heads']} heads ({s['kv_heads']} KV), "
              f"head_dim {s['head_dim']}, FFN {s['ffn']}, rope_theta {s['rope_theta']:g}, vocabulary {s['vocab']}.")
    if s.get('rope_local_theta'):
        lt = s['layer_types']
        md.append(f"Layers {', '.join(str(i) for i, x in enumerate(lt) if x != 'sliding_attention')} use full attention with the "
                  f"global RoPE base {s['rope_theta']:g}; the other {sum(x == 'sliding_attention' for x in lt)} a sliding window of "
                  f"{s['sliding_window']} tokens with the local base {s['rope_local_theta']:g} (in 512-token contexts the window "
                  f"covers every earlier position, so those layers attend like full ones here).")
    t = R['text']
    md.append(f"Text: {t['tokens']} tokens in {t['contexts']} contexts of {t['context']} ({t['english']} English, {t['code']} code); "
              f"the model's own next-token top-1 on it: {f(t['next_token_top1'])}.\n")

    md.append('### Reference forward pass against transformers\n')
    hid = 'hidden_max_abs_diff' in R['reference_check'][0]
    md.append('| input | tokens | max abs logit diff | largest abs logit | ' +
              ('hidden states: max abs diff / largest abs value / worst rel L2 | ' if hid else '') +
              'argmax agreement | next-token rank agreement | next-token top-1 | last position top 5 (ours) |')
    md.append('|---|---:|---:|---:|' + ('---:|' if hid else '') + '---:|---:|---:|---|')
    for c in R['reference_check']:
        p = c['prompt'].replace('\n', '\\n').replace('|', '\\|')
        top5 = ', '.join(repr(x).replace('|', '\\|') for x in c['last_top5_ref_text'])
        hcol = (f"{c['hidden_max_abs_diff']:.2e} / {c['hidden_max_abs']:.3g} / {c['hidden_max_rel_l2']:.1e} | " if hid else '')
        md.append(f"| `{p[:60]}` | {c['tokens']} | {c['max_abs_diff']:.2e} | {c['max_abs_logit']:.1f} | {hcol}{f(c['argmax_agree'])} | "
                  f"{f(c['rank_agree'])} | {f(c['top1_next_ref'])} | {top5} |")

    # PRF
    P = R['prf']
    rl = P['r']
    rows = P['layers']
    md.append('\n### PRF attention\n')
    md.append(f"{P['contexts']} contexts ({P['contexts'] * t['context']} tokens), every layer; beta_floor {P['beta_floor']}. "
              f"prf_W at r < 2048 is the prefix of the r = 2048 conversion's (checked: {R['prf_nested']}).\n")
    md.append('| r | prf_W bytes | state bytes (R, s) | KV-cache tokens in the same bytes | runtime PRF vs true attention (rel L2, mean over layers) | top-1 agreement | vs its own kernel exp(x^T D y / tau) (sampling error) | per-head PRF on the real q, k (rel L2, layers 0, ' + str(P['head_layer_stride']) + ', ' + str(2 * P['head_layer_stride']) + ', ...) | its top-1 |')
    md.append('|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for r in rl:
        rs = str(r)
        hr = [x.get(f'head_rel_{r}') for x in rows if x.get(f'head_rel_{r}') is not None]
        ht = [x.get(f'head_top1_{r}') for x in rows if x.get(f'head_top1_{r}') is not None]
        md.append(f"| {r} | {mib(P['bytes'][rs]['prf_W'])} | {mib(P['bytes'][rs]['state'])} | {P['kv_cache_tokens_same_bytes'][rs]:.0f} | "
                  f"{f(np.mean([x[f'rel_{r}'] for x in rows]))} | {f(np.mean([x[f'top1_{r}'] for x in rows]))} | "
                  f"{f(np.mean([x[f'mc_rel_{r}'] for x in rows]))} | {f(np.mean(hr)) if hr else '-'} | {f(np.mean(ht)) if ht else '-'} |")
    md.append(f"\nThe kernel alone, sampled exactly (softmax of x^T D y / tau, no features): rel L2 "
              f"{f(np.mean([x['surrogate_rel'] for x in rows]))} (layers {f(min(x['surrogate_rel'] for x in rows))}-"
              f"{f(max(x['surrogate_rel'] for x in rows))}), top-1 {f(np.mean([x['surrogate_top1'] for x in rows]))}; "
              f"E|x+y|_D^2 / tau over real pairs: {f(min(x['spread'] for x in rows), 2)}-{f(max(x['spread'] for x in rows), 2)}; "
              f"share of feature exponents beyond f32's exp range: {f(max(x['f32_overflow'] for x in rows), 4)}; "
              f"rows where the floor decides the denominator at r 512: {f(np.mean([x['floor_512'] for x in rows]), 4)}.\n")
    md.append('Per layer (r = 512 unless named):\n')
    md.append('| layer | runtime PRF rel L2 | top-1 | kernel alone rel L2 | kernel top-1 | sampling error | E\\|x+y\\|_D^2/tau | per-head PRF r 512 | r 2048 |')
    md.append('|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for x in rows:
        md.append(f"| {x['layer']} | {f(x['rel_512'])} | {f(x['top1_512'])} | {f(x['surrogate_rel'])} | {f(x['surrogate_top1'])} | "
                  f"{f(x['mc_rel_512'])} | {f(x['spread'], 2)} | {f(x.get('head_rel_512'))} | {f(x.get('head_rel_2048'))} |")
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot(rl, [np.mean([x[f'rel_{r}'] for x in rows]) for r in rl], 'o-', label='runtime PRF (published prf_W) vs true attention')
    ax[0].plot(rl, [np.mean([x[f'mc_rel_{r}'] for x in rows]) for r in rl], 's-', label='runtime PRF vs its own kernel (sampling error)')
    ax[0].axhline(np.mean([x['surrogate_rel'] for x in rows]), ls='--', c='gray', label='its kernel, exact (r = inf)')
    hl = [r for r in rl if any(x.get(f'head_rel_{r}') is not None for x in rows)]
    if hl:
        ax[0].plot(hl, [np.mean([x[f'head_rel_{r}'] for x in rows if x.get(f'head_rel_{r}') is not None]) for r in hl], '^-',
                   label="PRF on each head's real q, k (best PRF at this r)")
    ax[0].set_xscale('log', base=2)
    ax[0].set_xlabel('r (features)')
    ax[0].set_ylabel('relative L2 of the attention output')
    ax[0].set_title(f'{name}: PRF attention, mean over layers')
    ax[0].legend(fontsize=7)
    ax[1].plot(rl, [np.mean([x[f'top1_{r}'] for x in rows]) for r in rl], 'o-', label='runtime PRF')
    if hl:
        ax[1].plot(hl, [np.mean([x[f'head_top1_{r}'] for x in rows if x.get(f'head_top1_{r}') is not None]) for r in hl], '^-', label='per-head PRF')
    ax[1].axhline(np.mean([x['surrogate_top1'] for x in rows]), ls='--', c='gray', label='its kernel, exact')
    ax[1].set_xscale('log', base=2)
    ax[1].set_xlabel('r')
    ax[1].set_ylabel('top-1 attended position agreement')
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'prf.png'), dpi=90)
    plt.close(fig)

    # overlays
    O = R['overlays']
    rvs = sorted({x['rv'] for x in O['rows']})
    md.append('\n### Overlays (W_O at rank r_v)\n')
    md.append('| r_v | bytes | energy of W_O kept (mean) | SVD optimum | ratio (worst layer) | output rel L2 on real attention outputs | with the SVD basis | best rank-r_v for these outputs (in sample) |')
    md.append('|---:|---:|---:|---:|---:|---:|---:|---:|')
    for rv in rvs:
        rr = [x for x in O['rows'] if x['rv'] == rv]
        md.append(f"| {rv} | {mib(O['bytes'][str(rv)])} | {f(np.mean([x['energy'] for x in rr]))} | {f(np.mean([x['energy_opt'] for x in rr]))} | "
                  f"{f(np.mean([x['energy'] / x['energy_opt'] for x in rr]))} ({f(min(x['energy'] / x['energy_opt'] for x in rr))}) | "
                  f"{f(np.mean([x['out_rel'] for x in rr]))} | {f(np.mean([x['out_rel_svd'] for x in rr]))} | {f(np.mean([x['out_rel_data'] for x in rr]))} |")
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, lab in (('out_rel', 'published U'), ('out_rel_svd', 'SVD of W_O (optimum for W_O)'), ('out_rel_data', 'best rank r_v for the real outputs')):
        ax.plot(rvs, [np.mean([x[key] for x in O['rows'] if x['rv'] == rv]) for rv in rvs], 'o-', label=lab)
    ax.set_xlabel('r_v')
    ax.set_ylabel('relative L2 of W_O o on real attention outputs')
    ax.set_title(f'{name}: overlays, mean over layers')
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'overlays.png'), dpi=90)
    plt.close(fig)

    # FFN
    F = R['ffn']
    fr = F['rows']
    md.append('\n### FFN collapse and the linear dictionary\n')
    md.append(f"Inputs: the real FFN inputs (after the norm), every {F['ffn_stride']}nd token; fits on the even ones, errors on the odd "
              f"ones ({fr[0]['n_test']} per layer). Published dictionary: {mib(F['published_bytes'])} of arrays.\n")
    lc = F['lookup_check']
    if lc:
        md.append('Published dictionary read through `stk_lookup` (every key of M+ and M-) against tools/fidelity\'s emulation of the stage:\n')
        md.append('| layer | emulated entries (non-zero) | of them found by stk_lookup | keys outside found (of 20000 tried) | max abs value diff | rel L2 vs true FFN via lookup |')
        md.append('|---:|---:|---:|---:|---:|---:|')
        for c in lc:
            md.append(f"| {c['layer']} | {c['emulated']} | {c['found']} | {c['stray_of_20000']} | {c['max_abs_diff']:.2e} | {f(c['rel_lookup'])} |")
    outs = [str(x['layer']) for x in fr if x['ls_dense'] > 1.5]
    md.append('\nDense use (every feature active, `y = sum_j |x_j| M^sign(x_j)[:, j]`), median over layers (worst layer' +
              (f"; layer(s) {', '.join(outs)} have a few tokens with outsized FFN outputs that no linear fit follows" if outs else '') + '):\n')
    md.append('| map | entries per layer | rel L2 vs the true FFN output |')
    md.append('|---|---:|---:|')

    def mean_worst(k):
        v = [x[k] for x in fr]
        return f'{f(np.median(v))} ({f(max(v))})'
    md.append(f"| zero (predict 0) | 0 | 1.000 |")
    for topl in F['topls']:
        md.append(f"| dictionary, top-L {topl}, cap 64 | {fr[0][f'entries_{topl}_64']} | {mean_worst(f'dict_{topl}_64')} |")
    for cap in F['caps']:
        if cap != 64:
            md.append(f"| dictionary, top-L 12, cap {cap} | {fr[0][f'entries_12_{cap}']} | {mean_worst(f'dict_12_{cap}')} |")
    d = R['shape']['d_model']
    md.append(f"| exact collapse (every entry) | {2 * d * d} | {mean_worst('collapse_exact')} |")
    md.append(f"| least squares, dictionary form (M+ relu(x) + M- relu(-x)), top-(L+64) per column | {2 * d * (12 + 64)} | {mean_worst('ls_orthant_budget_12')} |")
    md.append(f"| least squares, dictionary form, every entry | {2 * d * d} | {mean_worst('ls_orthant')} |")
    md.append(f"| least squares, plain linear map | {d * d} | {mean_worst('ls_dense')} |")
    md.append('\nSparse use (the spec\'s reading: only the k largest |x_j| active), the exact collapse:\n')
    md.append('| k active | collapse vs the FFN on the same sparse input | collapse vs the true output | the FFN on the sparse input vs the true output |')
    md.append('|---:|---:|---:|---:|')
    for k in F.get('sparse_k', [1, 6, 58]):
        md.append(f"| {k} | {mean_worst(f'sparse{k}_vs_ffn_sparse')} | {mean_worst(f'sparse{k}_vs_true')} | {mean_worst(f'ffn_sparse{k}_vs_true')} |")
    md.append('\nPer layer (dense use):\n')
    md.append('| layer | input rms | dictionary (12, 64) | via stk_lookup | exact collapse | LS dictionary form, same entries | LS dictionary form, all | LS linear |')
    md.append('|---:|---:|---:|---:|---:|---:|---:|---:|')
    for x in fr:
        md.append(f"| {x['layer']} | {f(x['x_rms'])} | {f(x['dict_12_64'])} | {f(x.get('dict_lookup'))} | {f(x['collapse_exact'])} | "
                  f"{f(x['ls_orthant_budget_12'])} | {f(x['ls_orthant'])} | {f(x['ls_dense'])} |")
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    caps = F['caps']
    ent = [fr[0][f'entries_12_{c}'] for c in caps]
    ax[0].plot(ent, [np.mean([x[f'dict_12_{c}'] for x in fr]) for c in caps], 'o-', label='dictionary (top-L 12), cap varied')
    ax[0].plot(ent, [np.mean([x[f'ls_orthant_cap_{c}'] for x in fr]) for c in caps], 's-', label='least squares, same entries per column')
    for c, e in zip(caps, ent):
        ax[0].annotate(f'cap {c}', (e, np.mean([x[f'dict_12_{c}'] for x in fr])), fontsize=7)
    ax[0].set_xscale('log')
    ax[0].set_xlabel('entries per layer (both signs)')
    ax[0].set_ylabel('rel L2 vs the true FFN (real inputs)')
    ax[0].set_title(f'{name}: FFN dictionary, mean over layers')
    ax[0].legend(fontsize=7)
    tl = F['topls']
    ax[1].plot(tl, [np.mean([x[f'dict_{t_}_64'] for x in fr]) for t_ in tl], 'o-', label='dictionary, cap 64')
    ax[1].plot(tl, [np.mean([x[f'ls_orthant_budget_{t_}'] for x in fr]) for t_ in tl], 's-', label='least squares, same entries')
    ax[1].set_xlabel('top-L')
    ax[1].set_ylabel('rel L2 vs the true FFN')
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'ffn.png'), dpi=90)
    plt.close(fig)

    # memory
    M = R['memory']
    md.append('\n### Positional memory\n')
    two = 'rope_local_theta' in M and M['rope_local_theta']
    md.append(f"Target: the RoPE kernel sum_i e_i cos(theta_i t) / sum_i e_i, e_i the energy of rotary pair i in the real pre-RoPE q, k "
              f"(|q_i| |k_i| summed over tokens, heads, layers), beside 16.3's weight-energy target. Published bank: {M['coeff']}.\n")
    if two:
        md.append(f"The bank fits one base: the global {M['rope_theta']:g} (layers {', '.join(map(str, M['global_layers']))}); the first table's "
                  f"target is those layers' kernel. The {len(M['sliding_layers'])} sliding layers rotate with the local base "
                  f"{M['rope_local_theta']:g}: the second table measures the same bank against their kernel, and against every "
                  f"layer's kernel with its own base.\n")
    md.append('| filter | bytes | cosine, 32 steps | rel L2, 32 | cosine, 512 | rel L2, 512 | (weights target) cosine 32 / rel L2 512 |')
    md.append('|---|---:|---:|---:|---:|---:|---:|')

    def nbytes(k):
        return '32' if 'AR(2)' in k else (str(32 * int(k.split(', ')[1].split()[0])) if 'section' in k else '-')
    for k in M['windows']['32']['activations']:
        a32 = M['windows']['32']['activations'][k]
        a512 = M['windows']['512']['activations'][k]
        w32 = M['windows']['32']['weights'][k]
        w512 = M['windows']['512']['weights'][k]
        md.append(f"| {k} | {nbytes(k)} | {f(a32[0], 4)} | {f(a32[1], 4)} | {f(a512[0], 4)} | {f(a512[1], 4)} | {f(w32[0], 4)} / {f(w512[1], 4)} |")
    extra = [t for t in M['windows']['32'] if t not in ('activations', 'weights')]
    if extra:
        md.append('')
        md.append('| filter | bytes | ' + ' | '.join(f'{t}: cosine 32 / rel L2 32 / cosine 512 / rel L2 512' for t in extra) + ' |')
        md.append('|---|---:|' + '---:|' * len(extra))
        for k in M['windows']['32']['activations']:
            cells = []
            for t in extra:
                a32, a512 = M['windows']['32'][t][k], M['windows']['512'][t][k]
                cells.append(f"{f(a32[0], 4)} / {f(a32[1], 4)} / {f(a512[0], 4)} / {f(a512[1], 4)}")
            md.append(f"| {k} | {nbytes(k)} | " + ' | '.join(cells) + ' |')
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, v in M['curve'].items():
        if k == 't':
            continue
        lab = 'published AR(2)' if k == 'published' else ('RoPE kernel (real q, k energies' + (', global layers)' if two else ')')
                                                           if k == 'activations' else 'RoPE kernel, ' + k.replace('activations, ', ''))
        ax.plot(M['curve']['t'], v, label=lab)
    ax.set_xlabel('offset t (tokens)')
    ax.set_title(f'{name}: memory')
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'memory.png'), dpi=90)
    plt.close(fig)

    # bridge
    B = R['bridge']
    md.append('\n### Bridge guard on real tokens\n')
    md.append(f"{B['tokens']} token occurrences ({B['distinct']} distinct). Promoted pairs: {f(B['pair_rate_real'])} of the real "
              f"occurrences' pairs ({f(B['pair_rate_vocab'])} over the vocabulary); tokens with all 4 pairs promoted: "
              f"{f(B['token_all4_real'])} ({f(B['token_all4_vocab'])}). 0.9 of real pairs pass up to slack {f(B['slack_at_0.9_real'], 4)}. "
              f"Hub bits per real (token, context) pair through stk_lookup: {B['hub_popcount_hist']}.\n")
    md.append('| slack | pass rate, real occurrences | pass rate, vocabulary |')
    md.append('|---:|---:|---:|')
    for k, v in B['slack_curve'].items():
        md.append(f"| {k} | {f(v['real'])} | {f(v['vocab'])} |")
    open(os.path.join(out, 'tables.md'), 'w').write('\n'.join(md) + '\n')
    print('\n'.join(md))


if __name__ == '__main__':
    main()
