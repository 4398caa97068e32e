#!/usr/bin/env python3
"""tests/fixtures/eval/tiny-llama: the model `stk eval`'s tests run, written by transformers.

A Llama (2 layers, width 64, 4 query heads over 2 KV heads, SiLU-gated FFN of 128, RoPE) with
seeded random weights, saved by transformers' own save_pretrained as float32 safetensors, and the
byte-level BPE tokenizer of bindings/testdata/tiny-gpt2 (261 tokens, the id 260 its BOS/EOS) saved
by transformers' PreTrainedTokenizerFast over the tokenizers package's BPE, so AutoTokenizer and stk read the same files.  Norm weights
are perturbed so that no norm is the identity.

    python3 scripts/make_eval_fixture.py [OUT_DIR (tests/fixtures/eval/tiny-llama)]

Needs torch and transformers (the eval extra); the committed files were made with the versions
pinned in scripts/requirements-test.txt.
"""
import os
import sys

import torch
from tokenizers import Tokenizer
from tokenizers.decoders import ByteLevel as ByteLevelDecoder
from tokenizers.models import BPE
from tokenizers.pre_tokenizers import ByteLevel
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests", "fixtures", "eval", "tiny-llama")
    tiny = os.path.join(REPO, "bindings", "testdata", "tiny-gpt2")
    bpe = Tokenizer(BPE.from_file(os.path.join(tiny, "vocab.json"), os.path.join(tiny, "merges.txt")))
    bpe.pre_tokenizer = ByteLevel(add_prefix_space=False)
    bpe.decoder = ByteLevelDecoder()
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                  unk_token="<|endoftext|>")
    torch.manual_seed(20261128)
    cfg = LlamaConfig(vocab_size=261, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      bos_token_id=260, eos_token_id=260)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    print(out, sum(p.numel() for p in model.parameters()), "parameters")


if __name__ == "__main__":
    main()
