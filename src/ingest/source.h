// Reader-internal: one checkpoint file (a safetensors file or a torch zip) and the checkpoint
// built from one or more of them (shards).  Consumers use only checkpoint.h.  Defined in
// source.cc, except open_source, which is the dispatch of checkpoint.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "ingest/checkpoint.h"

namespace stk {

class Source {
public:
    virtual ~Source() = default;
    virtual const char *kind() const = 0;  // "safetensors" or "pytorch-zip"
    // Tensors of this file (any order; source_index is set by the owner).
    virtual std::vector<TensorRef> &tensors() = 0;
    virtual const uint8_t *bytes(const TensorRef &t, std::vector<uint8_t> &scratch) const = 0;
    virtual const MappedFile &file() const = 0;
    virtual void release(const TensorRef &t) const {}
};

// Open one file (safetensors or torch zip by content); refuses LFS pointers and legacy torch
// files with their own statuses.
std::unique_ptr<Source> open_source(const std::string &path);

// The one GGUF model of a directory: a single .gguf, or the files of one split set (its first
// file).  Empty if there is none; several models are refused by name (STK_E_INVALID_ARGUMENT).
std::string find_gguf(const std::string &dir);

// A checkpoint over several sources; `names` sorted and unique after construction (throws
// STK_E_CORRUPT on a name two sources share).
// `format` null: the sources' kind, with "-sharded" appended when extra_files holds an index.
std::unique_ptr<Checkpoint> make_checkpoint(const char *format, std::vector<std::unique_ptr<Source>> sources,
                                            std::vector<std::string> extra_files);

// STK_E_LFS_POINTER if the bytes are a Git LFS pointer file.
void refuse_lfs_pointer(const uint8_t *data, uint64_t size, const std::string &path);

// The last path component is a plain file name (no '/', no "..", not empty).
bool is_plain_file_name(const std::string &name);

// A name from a hostile file made fit for a one-line message: escape_bytes (core/error.h), at
// most 200 bytes (then "...").
std::string printable(std::string_view s);

}  // namespace stk
