#!/usr/bin/env python3
"""The English text of the tokenizer encode benchmark (docs/benchmarks.md, "Tokenizer encode").

There is no network: the text is prose already on a Debian 12 machine, concatenated in sorted path
order until it reaches the target size: the licences in /usr/share/common-licenses, then
/usr/share/doc/**/*.txt and *.md, then Perl's pod documentation, then (for the 24 MB text of the
`stk tokenize` whole-process bench) the gzip'd documents of /usr/share/doc, changelogs mostly,
decompressed.  Files that are not valid UTF-8
are skipped (every encoder must see the same text, and Node decodes files as UTF-8).  The list of
files used and the SHA-256 of the result are written beside it, so a run names its exact input.

    python3 scripts/make_english_corpus.py [OUT (bench/out/english.txt)] [MIN_MB (10)]
"""
import glob
import gzip
import hashlib
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', 'bench', 'out', 'english.txt')
min_bytes = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 10_000_000

sources = sorted(glob.glob('/usr/share/common-licenses/*'))
sources += sorted(glob.glob('/usr/share/doc/**/*.txt', recursive=True) + glob.glob('/usr/share/doc/**/*.md', recursive=True))
sources += sorted(glob.glob('/usr/share/perl/**/*.pod', recursive=True))
sources += sorted(glob.glob('/usr/share/doc/**/*.gz', recursive=True))

os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
parts, used, total = [], [], 0
for path in sources:
    if total >= min_bytes:
        break
    if not os.path.isfile(path) or os.path.islink(path):
        continue
    try:
        data = gzip.open(path).read() if path.endswith('.gz') else open(path, 'rb').read()
        data.decode('utf-8')
    except (OSError, EOFError, UnicodeDecodeError):
        continue
    if not data:
        continue
    parts.append(data)
    used.append(path)
    total += len(data)
if total < min_bytes:
    sys.exit(f'only {total} bytes of English text found, need {min_bytes}')
blob = b''.join(parts)
open(out, 'wb').write(blob)
digest = hashlib.sha256(blob).hexdigest()
with open(out + '.sources', 'w') as f:
    f.write(f'# {len(blob)} bytes, sha256 {digest}, {len(used)} files\n')
    f.write('\n'.join(used) + '\n')
print(f'{out}: {len(blob)} bytes from {len(used)} files, sha256 {digest}')
