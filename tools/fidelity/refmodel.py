"""A reference forward pass of a Llama-family decoder from its (dequantised) weights, in torch
(float32), written from the architecture (RMSNorm, rotary embedding as HF's rotate_half, grouped
query attention, SwiGLU), not by calling transformers' modules, so that checking it against
transformers' own forward is a check of something.

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
        if cfg.get('model_type') != 'llama':
            raise SystemExit(f"{model_dir}: model_type {cfg.get('model_type')!r}: only llama is written here")
        self.cfg = cfg
        self.d = cfg['hidden_size']
        self.L = cfg['num_hidden_layers']
        self.H = cfg['num_attention_heads']
        self.Hkv = cfg.get('num_key_value_heads', self.H)
        self.hd = cfg.get('head_dim') or self.d // self.H
        self.eps = cfg['rms_norm_eps']
        theta = cfg.get('rope_theta') or cfg.get('rope_parameters', {}).get('rope_theta')
        self.rope_theta = float(theta)
        sd = {}
        for f in sorted(os.listdir(model_dir)):
            if f.endswith('.safetensors'):
                sd.update(load_file(os.path.join(model_dir, f)))
        self.w = {k: v.float() for k, v in sd.items()}
        self.embed = self.w['model.embed_tokens.weight']
        self.head = self.w.get('lm_head.weight', self.embed)
        # the rotary angles of pair i: theta^(-2i/hd)
        self.inv_freq = 1.0 / (self.rope_theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))

    def layer(self, l, name):
        return self.w[f'model.layers.{l}.{name}.weight']

    def rms(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * g

    def rope(self, x, pos):
        # x [T, heads, hd]; HF's rotate_half pairs dimension i with i + hd/2.
        ang = pos[:, None].double() * self.inv_freq[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1).float()[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1).float()[:, None, :]
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    @torch.no_grad()
    def forward(self, ids, capture=None):
        """ids: 1-D LongTensor (one sequence from position 0).  capture: a set of layer indices
        (None: none).  Returns (logits [T, V], {layer: {name: tensor}})."""
        T = ids.shape[0]
        pos = torch.arange(T)
        h = self.embed[ids]
        caps = {}
        mask = torch.full((T, T), float('-inf')).triu(1)
        for l in range(self.L):
            x = self.rms(h, self.layer(l, 'input_layernorm'))
            q = (x @ self.layer(l, 'self_attn.q_proj').T).view(T, self.H, self.hd)
            k = (x @ self.layer(l, 'self_attn.k_proj').T).view(T, self.Hkv, self.hd)
            v = (x @ self.layer(l, 'self_attn.v_proj').T).view(T, self.Hkv, self.hd)
            qr, kr = self.rope(q, pos), self.rope(k, pos)
            rep = self.H // self.Hkv
            ke, ve = kr.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            s = torch.einsum('qhd,khd->hqk', qr, ke) / math.sqrt(self.hd) + mask
            p = torch.softmax(s, -1)
            o = torch.einsum('hqk,khd->qhd', p, ve).reshape(T, self.H * self.hd)
            h = h + o @ self.layer(l, 'self_attn.o_proj').T
            f_in = self.rms(h, self.layer(l, 'post_attention_layernorm'))
            g = f_in @ self.layer(l, 'mlp.gate_proj').T
            u = f_in @ self.layer(l, 'mlp.up_proj').T
            f_out = (torch.nn.functional.silu(g) * u) @ self.layer(l, 'mlp.down_proj').T
            h = h + f_out
            if capture is not None and l in capture:
                caps[l] = dict(x=x, q=q, k=k, v=v, qr=qr, kr=kr, o=o, f_in=f_in, f_out=f_out)
        h = self.rms(h, self.w['model.norm.weight'])
        return h @ self.head.T, caps


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
            a = hf(t[None]).logits[0]
        b, _ = ref.forward(t)
        diff = (a - b).abs().max().item()
        scale = a.abs().max().item()
        # rank of the true next token under each model, over the prompt's positions
        nxt = t[1:]
        ra = (a[:-1] > a[:-1].gather(1, nxt[:, None])).sum(1)
        rb = (b[:-1] > b[:-1].gather(1, nxt[:, None])).sum(1)
        out.append(dict(tokens=len(ids), max_abs_diff=diff, max_abs_logit=scale,
                        argmax_agree=float((a.argmax(-1) == b.argmax(-1)).float().mean()),
                        rank_agree=float((ra == rb).float().mean()),
                        top1_next_hf=float((ra == 0).float().mean()), top1_next_ref=float((rb == 0).float().mean()),
                        top5_next_ref=float((rb < 5).float().mean()),
                        last_top5_hf=a[-1].topk(5).indices.tolist(), last_top5_ref=b[-1].topk(5).indices.tolist()))
    return out
