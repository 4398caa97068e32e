// open_checkpoint: which files of a model directory are read, in which priority, and the
// checkpoint assembled from them (one or more sources, tensors sorted by name).
#include "ingest/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "ingest/safetensors.h"
#include "ingest/source.h"
#include "ingest/torch_zip.h"

namespace stk {

const TensorRef *Checkpoint::find(const std::string &name) const {
    const auto &ts = tensors();
    auto it = std::lower_bound(ts.begin(), ts.end(), name, [](const TensorRef &t, const std::string &n) { return t.name < n; });
    return it != ts.end() && it->name == name ? &*it : nullptr;
}

bool is_plain_file_name(const std::string &name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

void refuse_lfs_pointer(const uint8_t *data, uint64_t size, const std::string &path) {
    static const char kLfs[] = "version https://git-lfs.github.com/spec/";
    const size_t n = sizeof kLfs - 1;
    if (size >= n && std::memcmp(data, kLfs, n) == 0) {
        // The pointer names the real object's size: quote it so the user sees what is missing.
        std::string text(reinterpret_cast<const char *>(data), size_t(std::min<uint64_t>(size, 1024)));
        std::string real_size;
        if (size_t p = text.find("\nsize "); p != std::string::npos) {
            size_t e = text.find('\n', p + 1);
            real_size = text.substr(p + 6, (e == std::string::npos ? text.size() : e) - (p + 6));
            real_size.erase(std::remove_if(real_size.begin(), real_size.end(), [](char c) { return c < '0' || c > '9'; }),
                            real_size.end());
        }
        throw_error(STK_E_LFS_POINTER,
                    "%s: this is a Git LFS pointer file (%llu bytes), not the checkpoint itself%s%s%s; the repository "
                    "was cloned without its LFS objects: run `git lfs pull` (or `git lfs install` then clone again) "
                    "in that repository to fetch the real file",
                    path.c_str(), (unsigned long long)size, real_size.empty() ? "" : " (the real file has ",
                    real_size.c_str(), real_size.empty() ? "" : " bytes)");
    }
}

namespace {

// PyTorch's legacy (pre-1.6, _use_new_zipfile_serialization=False) format starts with a pickled
// magic number: PROTO 2, LONG1 of 10 bytes 0x1950a86a20f9469cfc6c.
bool is_legacy_torch(const uint8_t *d, uint64_t n) {
    static const uint8_t kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    return n >= sizeof kMagic && std::memcmp(d, kMagic, sizeof kMagic) == 0;
}

class MultiCheckpoint final : public Checkpoint {
public:
    MultiCheckpoint(std::string format, std::vector<std::unique_ptr<Source>> sources, std::vector<std::string> extra)
        : format_(std::move(format)), sources_(std::move(sources)), files_(std::move(extra)) {
        for (uint32_t i = 0; i < sources_.size(); i++) {
            files_.push_back(sources_[i]->file().path());
            bytes_ += sources_[i]->file().size();
            for (TensorRef &t : sources_[i]->tensors()) {
                tensors_.push_back(t);
                tensors_.back().source_index = i;
            }
        }
        std::sort(tensors_.begin(), tensors_.end(), [](const TensorRef &a, const TensorRef &b) { return a.name < b.name; });
        for (size_t i = 1; i < tensors_.size(); i++)
            if (tensors_[i].name == tensors_[i - 1].name)
                throw_error(STK_E_CORRUPT, "tensor '%s' is stored twice: in %s and in %s", tensors_[i].name.c_str(),
                            tensors_[i - 1].file.c_str(), tensors_[i].file.c_str());
    }
    const char *format() const override { return format_.c_str(); }
    const std::vector<TensorRef> &tensors() const override { return tensors_; }
    const uint8_t *tensor_bytes(const TensorRef &t, std::vector<uint8_t> &scratch) const override {
        if (t.source_index >= sources_.size())
            throw_error(STK_E_INVALID_ARGUMENT, "tensor '%s': source %u does not exist", t.name.c_str(), t.source_index);
        return sources_[t.source_index]->bytes(t, scratch);
    }
    uint64_t file_bytes() const override { return bytes_; }
    void release(const TensorRef &t) const override {
        if (t.source_index < sources_.size()) sources_[t.source_index]->release(t);
    }
    std::vector<std::string> files() const override { return files_; }

private:
    std::string format_;
    std::vector<std::unique_ptr<Source>> sources_;
    std::vector<std::string> files_;
    std::vector<TensorRef> tensors_;
    uint64_t bytes_ = 0;
};

bool is_dir(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string &s, const char *suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

std::unique_ptr<Checkpoint> make_checkpoint(const char *format, std::vector<std::unique_ptr<Source>> sources,
                                            std::vector<std::string> extra_files) {
    std::string f;
    if (format) {
        f = format;
    } else {
        f = sources.empty() ? "empty" : sources[0]->kind();
        for (auto &s : sources)
            if (f != s->kind()) f = "mixed";
        if (!extra_files.empty()) f += "-sharded";
    }
    return std::make_unique<MultiCheckpoint>(f, std::move(sources), std::move(extra_files));
}

std::unique_ptr<Source> open_source(const std::string &path) {
    MappedFile probe(path);
    const uint8_t *d = probe.data();
    uint64_t n = probe.size();
    refuse_lfs_pointer(d, n, path);
    if (n >= 4 && d[0] == 'P' && d[1] == 'K' && ((d[2] == 3 && d[3] == 4) || (d[2] == 5 && d[3] == 6)))
        return open_torch_zip(std::move(probe));
    if (is_legacy_torch(d, n)) return open_torch_legacy(std::move(probe));
    if (n >= 262 && std::memcmp(d + 257, "ustar", 5) == 0)
        throw_error(STK_E_UNSUPPORTED,
                    "%s: a tar archive (PyTorch < 0.4 tar serialization?); convert it with torch.save in a current "
                    "PyTorch or to safetensors",
                    path.c_str());
    if (n >= 2 && d[0] == 0x80 && d[1] >= 2 && d[1] <= 5)
        throw_error(STK_E_UNSUPPORTED,
                    "%s: a bare Python pickle stream, not a checkpoint format stk reads (safetensors or the PyTorch zip "
                    "format); re-save it with torch.save or as safetensors",
                    path.c_str());
    probe = MappedFile();
    return open_safetensors(path);
}

std::unique_ptr<Checkpoint> open_checkpoint(const std::string &path) {
    if (is_dir(path)) {
        static const char *kCandidates[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                            "pytorch_model.bin.index.json"};
        for (const char *c : kCandidates) {
            std::string p = path + "/" + c;
            if (file_exists(p)) return open_checkpoint(p);
        }
        throw_error(STK_E_NOT_FOUND,
                    "%s: no checkpoint found (looked for model.safetensors, model.safetensors.index.json, "
                    "pytorch_model.bin, pytorch_model.bin.index.json)",
                    path.c_str());
    }
    if (!file_exists(path)) throw_error(STK_E_NOT_FOUND, "%s: no such checkpoint file", path.c_str());
    if (ends_with(path, ".json")) return open_sharded(path);
    std::vector<std::unique_ptr<Source>> one;
    one.push_back(open_source(path));
    return make_checkpoint(nullptr, std::move(one), {});
}

}  // namespace stk
