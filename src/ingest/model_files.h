// The one description of a model's files (issue 31 item 5): what a model path names, probed once
// at the entry (stk_open, stk_plan_open, stk_model_open, stk_export_lwt, ...) and then handed to
// every reader instead of the path.  The readers (describe_model, load_model_config,
// open_checkpoint, the tokenizer stage) take these names and do not stat the path again; the
// refusals they would have raised on the path are kept here and raised where they were before,
// with the same status and message, so a caller that only asks "is this a GGUF?" is not refused
// for a missing config.json.
#ifndef STK_INGEST_MODEL_FILES_H
#define STK_INGEST_MODEL_FILES_H

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace stk {

enum class ModelKind {
    HfDirectory,        // config.json and one checkpoint file (or none: the refusal is kept)
    ShardedCheckpoint,  // config.json and a *.index.json naming the shards
    GgufFile,           // one GGUF (a file, or the one GGUF of a directory without config.json)
    GgufSplitSet,       // the first file of a GGUF split set (NAME-00001-of-0000N.gguf)
    NotAModel,          // a missing path, or a file that is neither: the config refusal says which
};

struct ModelFiles {
    std::string path;        // as given
    ModelKind kind = ModelKind::NotAModel;
    std::string dir;         // the model directory (a GGUF file's own path for a GGUF given as a file)
    std::string gguf;        // the GGUF file (first of a split set); empty for a HuggingFace directory
    std::string config;      // dir/config.json when it exists
    std::string roles;       // dir/stk_roles.json when it exists
    std::string checkpoint;  // the HuggingFace checkpoint file or shard index (or the GGUF beside config.json)
    bool checkpoint_is_gguf = false;
    std::vector<std::string> tokenizer;  // the tokenizer files present in dir, by name (kTokenizerFileNames order)
    uint64_t tokenizer_bytes = 0;        // their sizes added
    // Refusals found while resolving, raised by the reader that needs the missing file.
    std::exception_ptr config_refusal;
    std::exception_ptr checkpoint_refusal;

    bool is_gguf() const { return kind == ModelKind::GgufFile || kind == ModelKind::GgufSplitSet; }
    bool has_tokenizer_file(const char *name) const;
};

// The tokenizer files a model directory may hold, in the order the tokenizer loader prefers.
extern const char *const kTokenizerFileNames[6];

// Every probe of `path`, once.  Throws only what gguf_model_file threw on the same path (a
// directory without config.json holding several GGUF models).
ModelFiles resolve_model_files(const std::string &path);

}  // namespace stk

#endif
