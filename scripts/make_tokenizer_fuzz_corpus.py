#!/usr/bin/env python3
"""Seed corpora for the tokenizer fuzz targets (fuzz/gpt2_vocab.cc, fuzz/tokenizer_json.cc,
fuzz/sentencepiece_model.cc), cut from the real files in tests/data/third_party so that every seed is a
real writer's bytes, only smaller (< 64 KiB each).  Deterministic; run from the repository root:

    python3 scripts/make_tokenizer_fuzz_corpus.py
"""
import json
import os

DATA = os.path.join(os.path.dirname(__file__), '..', 'tests', 'data', 'third_party')
OUT = os.path.join(os.path.dirname(__file__), '..', 'fuzz', 'corpus')


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode('utf-8')
    assert len(data) < 64 * 1024, (target, name, len(data))
    with open(os.path.join(OUT, target, name), 'wb') as f:
        f.write(data)


def bpe_subset(vocab, merges, n_merges, split=lambda m: m.split(' ')):
    """The single-character tokens plus the first n_merges merges and their results."""
    keep = {t: i for t, i in vocab.items() if len(t) == 1}
    kept_merges = []
    for m in merges[:n_merges]:
        a, b = split(m) if isinstance(m, str) else m
        if a in keep and b in keep and a + b in vocab:
            keep[a + b] = vocab[a + b]
            kept_merges.append(m)
    ids = {t: i for i, t in enumerate(sorted(keep, key=lambda t: keep[t]))}  # ids 0..n-1
    return ids, kept_merges


# --- gpt2_vocab: vocab.json \0 merges.txt ------------------------------------------------------
enc = json.load(open(os.path.join(DATA, 'gpt2', 'encoder.json'), encoding='utf-8'))
merges = open(os.path.join(DATA, 'gpt2', 'vocab.bpe'), encoding='utf-8').read().split('\n')[1:]
merges = [m for m in merges if m]
ids, kept = bpe_subset(enc, merges, 400)
raw = json.dumps(ids, ensure_ascii=False, separators=(',', ':'))
esc = json.dumps(ids, ensure_ascii=True)
write('gpt2_vocab', 'raw_utf8', raw + '\0#version: 0.2\n' + '\n'.join(kept) + '\n')
write('gpt2_vocab', 'escaped_crlf', esc + '\0' + '\r\n'.join(kept) + '\r\n')
write('gpt2_vocab', 'tiny', '{"a":0,"b":1,"ab":2}\0a b\n')

# --- tokenizer_json ------------------------------------------------------------------------------
def tj_subset(path, n_merges, n_pieces=300):
    d = json.load(open(path, encoding='utf-8'))
    m = d['model']
    if 'merges' in m:
        vocab = m['vocab']
        ids, kept = bpe_subset(vocab, m['merges'], n_merges)
        # keep byte pieces and special tokens of the original too
        extra = [t for t in vocab if t.startswith('<') and t.endswith('>') and t not in ids]
        for t in sorted(extra, key=lambda t: vocab[t])[:260]:
            ids[t] = len(ids)
        m['vocab'] = ids
        m['merges'] = kept
        added = []
        for a in d.get('added_tokens') or []:
            if a['content'] in ids:
                a['id'] = ids[a['content']]
                added.append(a)
        d['added_tokens'] = added
    else:
        m['vocab'] = m['vocab'][:n_pieces]
        d['added_tokens'] = [a for a in d.get('added_tokens') or [] if a['id'] < n_pieces]
        if d.get('normalizer', {}).get('type') == 'Precompiled':
            d['normalizer'] = None
    return json.dumps(d, ensure_ascii=False)


write('tokenizer_json', 'gpt2', tj_subset(os.path.join(DATA, 'gpt2', 'hf-dir', 'tokenizer.json'), 300))
write('tokenizer_json', 'llama2', tj_subset(os.path.join(DATA, 'tokenizer-json', 'llama2.tokenizer.json'), 400))
write('tokenizer_json', 'pythia_pairs', tj_subset(os.path.join(DATA, 'tokenizer-json', 'pythia-410m.tokenizer.json'), 300))
write('tokenizer_json', 't5_unigram', tj_subset(os.path.join(DATA, 'tokenizer-json', 't5-small.tokenizer.json'), 0))
write('tokenizer_json', 'metaspace', json.dumps({
    'pre_tokenizer': {'type': 'Metaspace', 'replacement': '\u2581', 'prepend_scheme': 'first', 'split': True},
    'model': {'type': 'BPE', 'unk_token': '<unk>', 'byte_fallback': True,
              'vocab': {'<unk>': 0, '\u2581': 1, 'a': 2, 'b': 3, '\u2581a': 4, 'ab': 5, '\u2581ab': 6, '<0x0A>': 7},
              'merges': [['a', 'b'], ['\u2581', 'ab'], ['\u2581', 'a']]},
    'post_processor': {'type': 'RobertaProcessing', 'cls': ['<unk>', 0], 'sep': ['a', 2]}}, ensure_ascii=False))


# --- sentencepiece_model: ModelProto with the first pieces only ---------------------------------
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if not c & 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        start = i
        tag, i = varint(b, i)
        wt = tag & 7
        if wt == 0:
            _, i = varint(b, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = varint(b, i); i += n
        yield tag >> 3, b[start:i]


def enc_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7F; v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def sp_subset(path, n_pieces, drop_charsmap):
    b = open(path, 'rb').read()
    out = bytearray()
    k = 0
    for num, raw in fields(b):
        if num == 1:
            k += 1
            if k > n_pieces:
                continue
        if num == 3 and drop_charsmap:  # normalizer_spec without precompiled_charsmap (field 2)
            _, i = varint(raw, 0)
            n, i = varint(raw, i)
            body = b''.join(r for f, r in fields(raw[i:i + n]) if f != 2)
            raw = raw[:1] + enc_varint(len(body)) + body
        out += raw
    return bytes(out)


SP = os.path.join(DATA, 'sentencepiece')
write('sentencepiece_model', 'llama2_head', sp_subset(os.path.join(SP, 'llama2.tokenizer.model'), 600, False))
write('sentencepiece_model', 'mistral_head', sp_subset(os.path.join(SP, 'mistral-v0.1.tokenizer.model'), 400, False))
write('sentencepiece_model', 'unigram_head', sp_subset(os.path.join(SP, 'unigram-test.model'), 300, True))
