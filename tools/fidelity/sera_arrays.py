"""Read the Sera arrays of a published generation (docs/format.md, "Sera array").

A small independent reader for the fidelity tools: the 128-byte header is parsed and checked
(magic, header crc32c is not recomputed here: `stk check` verifies every checksum; this reader
checks what it needs to index the payload: magic, dtype, rank, dims, byte_len, file size).
"""
import os
import struct

import numpy as np

MAGIC = 0x53455241
DTYPES = {1: np.float64, 2: np.float32, 3: np.int32, 4: np.int16, 5: np.int8, 6: np.uint8,
          7: np.int16, 8: np.int16, 9: np.uint16}


def generation_dir(root_or_dir):
    """A generations root (CURRENT) or a generation directory -> the generation directory."""
    cur = os.path.join(root_or_dir, 'CURRENT')
    if os.path.isfile(cur):
        name = open(cur, 'rb').read().split()[0].decode()  # "<name> <curr_hash>\n" (docs/format.md)
        # CURRENT names the generation; accept either a bare name or a path under generations/
        cand = [os.path.join(root_or_dir, 'generations', os.path.basename(name)), os.path.join(root_or_dir, name)]
        for c in cand:
            if os.path.isdir(os.path.join(c, 'arrays')):
                return c
        gens = sorted(os.listdir(os.path.join(root_or_dir, 'generations')))
        return os.path.join(root_or_dir, 'generations', gens[-1])
    return root_or_dir


def read_array(gen, name):
    path = os.path.join(generation_dir(gen), 'arrays', name)
    data = open(path, 'rb').read()
    if len(data) < 128:
        raise ValueError(f'{path}: shorter than the 128-byte header')
    magic, dtype, rank = struct.unpack_from('<IHH', data, 0)
    dims = struct.unpack_from('<5Q', data, 8)
    byte_len, = struct.unpack_from('<Q', data, 48)
    if magic != MAGIC:
        raise ValueError(f'{path}: bad magic at offset 0')
    if dtype not in DTYPES or not 1 <= rank <= 5:
        raise ValueError(f'{path}: dtype {dtype} rank {rank}')
    shape = dims[:rank]
    dt = np.dtype(DTYPES[dtype]).newbyteorder('<')
    if int(np.prod(shape)) * dt.itemsize != byte_len or len(data) != 128 + byte_len:
        raise ValueError(f'{path}: byte_len {byte_len} does not match dims {shape} / file size {len(data)}')
    return np.frombuffer(data, dtype=dt, offset=128).reshape(shape)


def array_bytes(gen, name):
    return os.path.getsize(os.path.join(generation_dir(gen), 'arrays', name))
