// What the readers share: one checkpoint assembled from several sources (shards), and small
// checks on hostile names and bytes.  Readers include this; the dispatch (checkpoint.cc) sits
// above them all.
#include "ingest/source.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace stk {

std::string printable(std::string_view s) { return escape_bytes(s, 200); }

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
                    path.c_str(), (unsigned long long)size, real_size.empty() ? "" : " (the real file has ", real_size.c_str(),
                    real_size.empty() ? "" : " bytes)");
    }
}

namespace {

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
    std::vector<TensorRef> &mutable_tensors() override { return tensors_; }
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

}  // namespace stk
