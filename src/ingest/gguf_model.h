// A GGUF file seen as the HuggingFace model it was converted from (issue 24): the config.json its
// metadata implies, normalised by the same parse_model_config as a model directory's, and a
// Checkpoint whose tensors carry the HF names and layouts (llama.cpp's convert_hf_to_gguf.py
// changes are undone: Q/K rows un-permuted, +1 on norm weights taken off, Conv1D transposes
// restored, fused QKV rows put back in the family's order, MoE expert stacks split per expert,
// split tensors gathered).  What each family's converter did is that family's GGUF part
// (ingest/gguf_family.h, in its own src/ingest/families/ file); this is the driver that reads any
// of them.  The raw GGUF tensors (names as stored, quantised types dequantised) come from
// ingest/gguf.h; this file is the layer above it.  docs/format.md, "GGUF input", lists every
// mapping.
#pragma once

#include <memory>
#include <string>

#include "ingest/checkpoint.h"
#include "ingest/config.h"

namespace stk {

class GgufFile;

// The GGUF a model path names, or "" if it is not one: a file that starts with the GGUF magic
// (any name; for one file of a split set, that file) or is named *.gguf (a damaged one is then
// refused for its bytes), or a directory without config.json that
// holds exactly one GGUF model (one file, or one split set NAME-0000k-of-0000n.gguf: its first
// file).  A directory with several GGUF models is refused, naming them.
std::string gguf_model_file(const std::string &path);

// config.json text equivalent to the GGUF's metadata (general.architecture and its
// {arch}.* keys, with the tensor shapes for what the metadata leaves out: vocabulary size, tied
// head, biases).  STK_E_UNKNOWN_MODEL names an architecture stk has no mapping for.
std::string gguf_config_json(const GgufFile &f, const std::string &path);

struct GgufModel {
    ParsedConfig parsed;
    std::unique_ptr<Checkpoint> checkpoint;  // HF names and layouts
};
// Open a GGUF model (a path gguf_model_file accepted).
GgufModel open_gguf_model(const std::string &gguf_path);

}  // namespace stk
