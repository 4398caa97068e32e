#!/bin/sh
# Regenerates the sentencepiece reference ids (Debian libsentencepiece-dev).  Run from this folder.
set -e
g++ -O1 -o /tmp/sp_reference sp_reference.cc -lsentencepiece
D=../third_party/sentencepiece
/tmp/sp_reference $D/llama2.tokenizer.model sp_text.txt | sed "s#$D/##" > sp_llama2_reference.json
/tmp/sp_reference $D/mistral-v0.1.tokenizer.model sp_text.txt | sed "s#$D/##" > sp_mistral_reference.json
# HF tokenizers (npm package `tokenizers`; `npm ci` in bench/node first)
T=../third_party/tokenizer-json
node hf_reference.js $T/pythia-410m.tokenizer.json hf_text.txt > hf_pythia_reference.json
node hf_reference.js $T/llama2.tokenizer.json hf_text.txt > hf_llama2_reference.json
node hf_reference.js ../third_party/gpt2/hf-dir/tokenizer.json hf_text.txt > hf_gpt2_reference.json
