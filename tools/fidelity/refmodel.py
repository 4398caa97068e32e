"""A reference forward pass of a Llama-family or Gemma 3 text decoder from its (dequantised)
weights, in torch (float32), written from the architecture, not by calling transformers' modules,
so that checking it against transformers' own forward is a check of something.

Llama: RMSNorm, rotary embedding as HF's rotate_half, grouped-query attention, SwiGLU.
Gemma 3 (model_type gemma3_text): the embedding times sqrt(d_model) (rounded to the model dtype),
RMSNorm with gain 1 + w, sandwich norms (input / post_attention around attention,
pre_feedforward / post_feedforward around the FFN), per-head RMSNorm of q and k before RoPE,
scores scaled by query_pre_attn_scalar^-1/2 and soft-capped when attn_logit_softcapping is set,
a GELU-tanh gated FFN, and per layer (config layer_types) either a sliding window with the local
RoPE base or full attention with the global base; final logit soft-capping when set.

`Model.forward(ids, capture=...)` returns the logits and, per layer, what the fidelity report
measures the converted stages against: the attention input x (after the layer's norm, d_model),
q and k before and after RoPE, v, the attention output o (the concatenated heads, W_O's input,
d_v), and the FFN input and output.
"""
import json
import math
import os

import torch
from safetensors.torch import load_file


class Model:
    def __init__(self, model_dir):
        cfg = json.load(open(os.path.join(model_dir, 'config.json')))
        self.kind = cfg.get('model_type')
        if self.kind not in ('llama', 'gemma3_text'):
            raise SystemExit(f"{model_dir}: model_type {self.kind!r}: only llama and gemma3_text are written here")
        self.gemma = self.kind == 'gemma3_text'
        self.cfg = cfg
        self.d = cfg['hidden_size']
        self.L = cfg['num_hidden_layers']
        self.H = cfg['num_attention_heads']
        self.Hkv = cfg.get('num_key_value_heads', self.H)
        self.hd = cfg.get('head_dim') or self.d // self.H
        self.eps = cfg['rms_norm_eps']
        rp = cfg.get('rope_parameters') or {}
        if self.gemma:
            # per layer type: sliding layers use the local base, full layers the global one
            self.layer_types = cfg['layer_types']
            for t in rp.values():
                if t.get('rope_type', 'default') != 'default':
                    raise SystemExit(f"{model_dir}: rope_type {t.get('rope_type')!r}: only default RoPE is written here")
            self.rope_theta = float(rp['full_attention']['rope_theta'])
            self.rope_local_theta = float(rp['sliding_attention']['rope_theta'])
            self.window = cfg.get('sliding_window')
            self.scale = cfg['query_pre_attn_scalar'] ** -0.5
            self.softcap = cfg.get('attn_logit_softcapping')
            self.final_softcap = cfg.get('final_logit_softcapping')
        else:
            self.layer_types = ['full_attention'] * self.L
            theta = cfg.get('rope_theta') or rp.get('rope_theta')
            self.rope_theta = float(theta)
            self.rope_local_theta = None
            self.window = None
            self.scale = self.hd ** -0.5
            self.softcap = self.final_softcap = None
        sd = {}
        for f in sorted(os.listdir(model_dir)):
            if f.endswith('.safetensors'):
                sd.update(load_file(os.path.join(model_dir, f)))
        self.w = {k: v.float() for k, v in sd.items()}
        self.embed = self.w['model.embed_tokens.weight']
        self.head = self.w.get('lm_head.weight', self.embed)
        # the rotary angles of pair i: theta^(-2i/hd)
        self.inv_freq = self.inv_freq_of(self.rope_theta)
        self.inv_freq_local = self.inv_freq_of(self.rope_local_theta) if self.rope_local_theta else None

    def inv_freq_of(self, theta):
        return 1.0 / (theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))

    def layer_inv_freq(self, l):
        return self.inv_freq_local if self.layer_types[l] == 'sliding_attention' else self.inv_freq

    def layer(self, l, name):
        return self.w[f'model.layers.{l}.{name}.weight']

    def rms(self, x, g):
        # Gemma's RMSNorm stores w with gain 1 + w
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * ((1.0 + g) if self.gemma else g)

    def rope(self, x, pos, inv_freq=None):
        # x [T, heads, hd]; HF's rotate_half pairs dimension i with i + hd/2.
        inv_freq = self.inv_freq if inv_freq is None else inv_freq
        ang = pos[:, None].double() * inv_freq[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1).float()[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1).float()[:, None, :]
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    @torch.no_grad()
    def forward(self, ids, capture=None, hidden=False):
        """ids: 1-D LongTensor (one sequence from position 0).  capture: a set of layer indices
        (None: none).  Returns (logits [T, V], {layer: {name: tensor}}), and with hidden=True the
        residual stream after the embedding and after every layer (as transformers'
        output_hidden_states, whose last entry is after the final norm) as a third value."""
        T = ids.shape[0]
        pos = torch.arange(T)
        h = self.embed[ids]
        if self.gemma:
            h = h * torch.tensor(self.d ** 0.5, dtype=h.dtype)
        hs = [h]
        caps = {}
        qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
        full = ki <= qi
        for l in range(self.L):
            allowed = full
            if self.layer_types[l] == 'sliding_attention' and self.window:
                allowed = full & (qi - ki < self.window)
            mask = torch.zeros(T, T).masked_fill(~allowed, float('-inf'))
            x = self.rms(h, self.layer(l, 'input_layernorm'))
            q = (x @ self.layer(l, 'self_attn.q_proj').T).view(T, self.H, self.hd)
            k = (x @ self.layer(l, 'self_attn.k_proj').T).view(T, self.Hkv, self.hd)
            v = (x @ self.layer(l, 'self_attn.v_proj').T).view(T, self.Hkv, self.hd)
            if self.gemma:
                q = self.rms(q, self.layer(l, 'self_attn.q_norm'))
                k = self.rms(k, self.layer(l, 'self_attn.k_norm'))
            inv = self.layer_inv_freq(l)
            qr, kr = self.rope(q, pos, inv), self.rope(k, pos, inv)
            rep = self.H // self.Hkv
            ke, ve = kr.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            s = torch.einsum('qhd,khd->hqk', qr, ke) * self.scale
            if self.softcap:
                s = torch.tanh(s / self.softcap) * self.softcap
            p = torch.softmax(s + mask, -1)
            o = torch.einsum('hqk,khd->qhd', p, ve).reshape(T, self.H * self.hd)
            a = o @ self.layer(l, 'self_attn.o_proj').T
            if self.gemma:
                h = h + self.rms(a, self.layer(l, 'post_attention_layernorm'))
                f_in = self.rms(h, self.layer(l, 'pre_feedforward_layernorm'))
            else:
                h = h + a
                f_in = self.rms(h, self.layer(l, 'post_attention_layernorm'))
            g = f_in @ self.layer(l, 'mlp.gate_proj').T
            u = f_in @ self.layer(l, 'mlp.up_proj').T
            act = torch.nn.functional.gelu(g, approximate='tanh') if self.gemma else torch.nn.functional.silu(g)
            f_out = (act * u) @ self.layer(l, 'mlp.down_proj').T
            h = h + (self.rms(f_out, self.layer(l, 'post_feedforward_layernorm')) if self.gemma else f_out)
            hs.append(h)
            if capture is not None and l in capture:
                caps[l] = dict(x=x, q=q, k=k, v=v, qr=qr, kr=kr, o=o, f_in=f_in, f_out=f_out)
        h = self.rms(h, self.w['model.norm.weight'])
        hs[-1] = h
        logits = h @ self.head.T
        if self.final_softcap:
            logits = torch.tanh(logits / self.final_softcap) * self.final_softcap
        return (logits, caps, hs) if hidden else (logits, caps)

    def ffn(self, l, x):
        """The layer's FFN (the part the dictionary replaces) on inputs x [N, d]."""
        g = x @ self.layer(l, 'mlp.gate_proj').T
        u = x @ self.layer(l, 'mlp.up_proj').T
        act = torch.nn.functional.gelu(g, approximate='tanh') if self.gemma else torch.nn.functional.silu(g)
        return (act * u) @ self.layer(l, 'mlp.down_proj').T


def check_against_transformers(model_dir, ref, prompts_ids):
    """Logits of our forward against transformers' own forward on the same weights; next-token
    ranks.  Returns a list of dicts, one per prompt."""
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    hf.eval()
    out = []
    for ids in prompts_ids:
        t = torch.tensor(ids)
        with torch.no_grad():
            ho = hf(t[None], output_hidden_states=True)
        a = ho.logits[0]
        b, _, hs = ref.forward(t, hidden=True)
        diff = (a - b).abs().max().item()
        # the residual stream after the embedding and every layer (the last: after the final norm)
        hdiff = max((x[0] - y).abs().max().item() for x, y in zip(ho.hidden_states, hs))
        hscale = max(x[0].abs().max().item() for x in ho.hidden_states)
        hrel = max(((x[0] - y).norm() / x[0].norm()).item() for x, y in zip(ho.hidden_states, hs))
        scale = a.abs().max().item()
        # rank of the true next token under each model, over the prompt's positions
        nxt = t[1:]
        ra = (a[:-1] > a[:-1].gather(1, nxt[:, None])).sum(1)
        rb = (b[:-1] > b[:-1].gather(1, nxt[:, None])).sum(1)
        out.append(dict(tokens=len(ids), max_abs_diff=diff, max_abs_logit=scale, hidden_max_abs_diff=hdiff,
                        hidden_max_abs=hscale, hidden_max_rel_l2=hrel, hidden_states=len(hs),
                        argmax_agree=float((a.argmax(-1) == b.argmax(-1)).float().mean()),
                        rank_agree=float((ra == rb).float().mean()),
                        top1_next_hf=float((ra == 0).float().mean()), top1_next_ref=float((rb == 0).float().mean()),
                        top5_next_ref=float((rb < 5).float().mean()),
                        last_top5_hf=a[-1].topk(5).indices.tolist(), last_top5_ref=b[-1].topk(5).indices.tolist()))
    return out
