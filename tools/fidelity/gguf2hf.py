#!/usr/bin/env python3
"""Dequantise a GGUF model with transformers (gguf-py underneath) and write it as an HF directory
(f32 model.safetensors, config.json, tokenizer files): the "original" the fidelity report compares
against, and the input `stk convert` reads.

    python tools/fidelity/gguf2hf.py DIR_WITH_GGUF FILE.gguf OUT_DIR

transformers refuses save_pretrained on a GGUF-loaded model, so the state dict is written with
safetensors directly (the tied lm_head left out, as HF does).  transformers 5 writes the rotary
base under rope_parameters; it is copied to the top-level rope_theta that older readers (and
stk's config reader) look for.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    d, f, out = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(out, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    sd = {k: v.contiguous() for k, v in m.state_dict().items()}
    if m.config.tie_word_embeddings:
        sd.pop('lm_head.weight', None)
    save_file(sd, os.path.join(out, 'model.safetensors'), metadata={'format': 'pt'})
    cfg = m.config
    if hasattr(cfg, 'quantization_config'):
        del cfg.quantization_config
    cfg.save_pretrained(out)
    tok.save_pretrained(out)
    p = os.path.join(out, 'config.json')
    c = json.load(open(p))
    theta = c.get('rope_parameters', {}).get('rope_theta')
    if theta is not None and 'rope_theta' not in c:
        c['rope_theta'] = theta
    json.dump(c, open(p, 'w'), indent=2)
    print(out, len(sd), 'tensors')


if __name__ == '__main__':
    main()
