#include "ingest/model_files.h"

#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "ingest/gguf.h"
#include "ingest/source.h"

namespace stk {

const char *const kTokenizerFileNames[6] = {"tokenizer.json", "vocab.json", "merges.txt",
                                            "encoder.json",   "vocab.bpe",  "tokenizer.model"};

bool ModelFiles::has_tokenizer_file(const char *name) const {
    for (const std::string &t : tokenizer)
        if (t == name) return true;
    return false;
}

namespace {

bool starts_with_gguf_magic(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    uint8_t m[4] = {};
    ssize_t n = ::read(fd, m, 4);
    ::close(fd);
    return n == 4 && std::memcmp(m, "GGUF", 4) == 0;
}

bool ends_with(const std::string &s, const char *suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool regular(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

ModelKind gguf_kind(const std::string &file) {
    std::string name = file.substr(file.rfind('/') == std::string::npos ? 0 : file.rfind('/') + 1), prefix;
    uint32_t no = 0, count = 0;
    return gguf_split_name(name, &prefix, &no, &count) && count > 1 ? ModelKind::GgufSplitSet : ModelKind::GgufFile;
}

template <class F>
std::exception_ptr refusal_of(F f) {
    try {
        f();
    } catch (...) {
        return std::current_exception();
    }
    return nullptr;
}

}  // namespace

ModelFiles resolve_model_files(const std::string &path) {
    ModelFiles m;
    m.path = path;
    m.dir = path;
    struct stat st;
    const bool exists = ::stat(path.c_str(), &st) == 0;
    const bool is_dir = exists && S_ISDIR(st.st_mode);
    // The refusals of load_model_config, in its order (ingest/config.cc).
    if (!exists) {
        m.config_refusal = refusal_of([&] { throw_error(STK_E_NOT_FOUND, "%s: no such model directory", path.c_str()); });
    } else if (!is_dir) {
        m.config_refusal = refusal_of([&] {
            throw_error(STK_E_NOT_FOUND, "%s: not a directory (the model directory holds config.json and the weights)",
                        path.c_str());
        });
    }
    if (!is_dir) {
        // A file: a GGUF by its magic, or by its name (a damaged .gguf is opened, and refused for
        // what it is, not taken for a file of the HuggingFace directory around it).
        if (exists && S_ISREG(st.st_mode) && (starts_with_gguf_magic(path) || ends_with(path, ".gguf"))) {
            m.gguf = path;
            m.kind = gguf_kind(path);
        }
        return m;
    }
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const std::string config = path + "/config.json";
    if (regular(config)) {
        m.config = config;
        m.kind = ModelKind::HfDirectory;
        if (regular(path + "/stk_roles.json")) m.roles = path + "/stk_roles.json";
    } else {
        // Not a HuggingFace directory: the GGUF it holds, if any (several are refused here, as
        // gguf_model_file refused them).
        m.gguf = find_gguf(dir);
        if (!m.gguf.empty()) {
            m.kind = gguf_kind(m.gguf);
            return m;
        }
        m.config_refusal = refusal_of([&] {
            throw_error(STK_E_NOT_FOUND, "%s: missing: stk reads the model's shapes and type from config.json", config.c_str());
        });
        m.kind = ModelKind::NotAModel;
    }
    // The checkpoint, in open_checkpoint's order of preference (ingest/checkpoint.cc).
    static const char *kCandidates[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                        "pytorch_model.bin.index.json"};
    for (const char *c : kCandidates)
        if (regular(path + "/" + c)) {
            m.checkpoint = path + "/" + c;
            break;
        }
    if (m.checkpoint.empty()) {
        m.checkpoint_refusal = refusal_of([&] {
            if (std::string g = find_gguf(path); !g.empty()) {
                m.checkpoint = g;
                m.checkpoint_is_gguf = true;
                return;
            }
            throw_error(STK_E_NOT_FOUND,
                        "%s: no checkpoint found (looked for model.safetensors, model.safetensors.index.json, "
                        "pytorch_model.bin, pytorch_model.bin.index.json, *.gguf)",
                        path.c_str());
        });
    } else if (m.kind == ModelKind::HfDirectory && ends_with(m.checkpoint, ".json")) {
        m.kind = ModelKind::ShardedCheckpoint;
    }
    for (const char *t : kTokenizerFileNames) {
        struct stat ts;
        std::string p = path + "/" + t;
        if (::stat(p.c_str(), &ts) == 0 && S_ISREG(ts.st_mode)) {
            m.tokenizer.push_back(t);
            m.tokenizer_bytes += uint64_t(ts.st_size);
        }
    }
    return m;
}

}  // namespace stk
