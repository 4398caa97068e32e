#!/usr/bin/env python3
"""Copies a GGUF's metadata (every key/value, no tensors) into a new GGUF with gguf-py.

The DeepSeek-R1-Distill-Qwen-7B file scripts/fetch-real-models.sh assembles is only its first 2
of 48 parts: the metadata, and so the whole tokenizer, is there, the tensor data is not, so stk
and transformers both refuse the file itself.  The copy carries the same tokenizer.ggml.* values
(the real Qwen2 vocabulary, merges and tokenizer.ggml.pre = deepseek-r1-qwen) with no tensors, so
the tokenizer can be compared on real text.  gguf-py's reader builds its tensor table eagerly and
fails on the missing data; that step is skipped, nothing else.
Usage: gguf_metadata_only.py IN.gguf OUT.gguf
"""
import sys

import gguf
from gguf import GGUFValueType


def main(src, dst):
    gguf.GGUFReader._build_tensors = lambda self, offs, fields: setattr(self, "tensors", [])
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    n = 0
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if f.types[0] == GGUFValueType.ARRAY:
            if len(f.types) != 2:
                sys.exit(f"{src}: {name}: nested arrays are not copied")
            w.add_key_value(name, f.contents(), GGUFValueType.ARRAY, sub_type=f.types[1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
        n += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    print(f"{dst}: {n} keys of {src}, no tensors")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
