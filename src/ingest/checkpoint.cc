// open_checkpoint: which files of a model directory are read, in which priority, and the
// checkpoint assembled from them (one or more sources, tensors sorted by name).  The dispatch
// sits above the readers: it includes them, none of them includes it.
#include "ingest/checkpoint.h"
#include "ingest/model_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"
#include "ingest/gguf.h"
#include "ingest/safetensors.h"
#include "ingest/shard_index.h"
#include "ingest/source.h"
#include "ingest/torch_zip.h"

namespace stk {

const TensorRef *Checkpoint::find(const std::string &name) const {
    const auto &ts = tensors();
    auto it = std::lower_bound(ts.begin(), ts.end(), name, [](const TensorRef &t, const std::string &n) { return t.name < n; });
    return it != ts.end() && it->name == name ? &*it : nullptr;
}

namespace {

// PyTorch's legacy (pre-1.6, _use_new_zipfile_serialization=False) format starts with a pickled
// magic number: PROTO 2, LONG1 of 10 bytes 0x1950a86a20f9469cfc6c.
bool is_legacy_torch(const uint8_t *d, uint64_t n) {
    static const uint8_t kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    return n >= sizeof kMagic && std::memcmp(d, kMagic, sizeof kMagic) == 0;
}

bool is_dir(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string &s, const char *suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_gguf(const uint8_t *d, uint64_t n) { return n >= 4 && std::memcmp(d, "GGUF", 4) == 0; }

}  // namespace

std::string find_gguf(const std::string &dir) {
    std::set<std::string> models;  // a split set counts once, by its prefix
    std::map<std::string, std::string> first_file;
    DIR *d = ::opendir(dir.c_str());
    if (!d) return {};
    while (dirent *e = ::readdir(d)) {
        std::string name = e->d_name;
        if (!ends_with(name, ".gguf") || !file_exists(dir + "/" + name)) continue;
        std::string prefix;
        uint32_t no, count;
        std::string key = gguf_split_name(name, &prefix, &no, &count) ? prefix + "-of-" + std::to_string(count) : name;
        models.insert(key);
        if (!first_file.count(key) || name < first_file[key]) first_file[key] = name;
    }
    ::closedir(d);
    if (models.empty()) return {};
    if (models.size() > 1) {
        std::string list;
        for (const auto &m : models) list += (list.empty() ? "" : ", ") + first_file[m];
        throw_error(STK_E_INVALID_ARGUMENT, "%s: holds %zu GGUF models (%s); pass the file to open", dir.c_str(), models.size(),
                    list.c_str());
    }
    return dir + "/" + first_file.begin()->second;
}

std::unique_ptr<Checkpoint> open_gguf_checkpoint(const std::string &path) {
    std::vector<std::unique_ptr<Source>> sources = open_gguf_sources(path);
    const char *format = sources.size() > 1 ? "gguf-split" : "gguf";
    return make_checkpoint(format, std::move(sources), {});
}

namespace {

// open_source on a file already mapped (the mapping is kept by a torch source, not mapped twice).
std::unique_ptr<Source> open_source_mapped(MappedFile probe, const std::string &path) {
    const uint8_t *d = probe.data();
    uint64_t n = probe.size();
    refuse_lfs_pointer(d, n, path);
    if (n >= 4 && d[0] == 'P' && d[1] == 'K' && ((d[2] == 3 && d[3] == 4) || (d[2] == 5 && d[3] == 6)))
        return open_torch_zip(std::move(probe));
    if (is_legacy_torch(d, n)) return open_torch_legacy(std::move(probe));
    if (is_gguf(d, n)) {
        probe = MappedFile();
        std::vector<std::unique_ptr<Source>> g = open_gguf_sources(path);
        if (g.size() != 1)
            throw_error(STK_E_INVALID_ARGUMENT, "%s: one file of a GGUF split set of %zu; open it as a checkpoint", path.c_str(),
                        g.size());
        return std::move(g[0]);
    }
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

}  // namespace

std::unique_ptr<Source> open_source(const std::string &path) { return open_source_mapped(MappedFile(path), path); }

// Open every shard an index names (in the index's directory) and check that index and shards
// agree: every tensor of the index is in the shard it names, no shard holds a tensor the index
// does not list for it.  Works for model.safetensors.index.json and pytorch_model.bin.index.json.
std::unique_ptr<Checkpoint> open_sharded(const std::string &index_path);

std::unique_ptr<Checkpoint> open_sharded(const std::string &index_path) {
    std::string json = read_small_file(index_path, kSafetensorsMaxHeader);
    refuse_lfs_pointer(reinterpret_cast<const uint8_t *>(json.data()), json.size(), index_path);
    auto map = parse_shard_index(json, index_path);
    std::string dir = ".";
    if (size_t slash = index_path.rfind('/'); slash != std::string::npos) dir = index_path.substr(0, slash);

    // Shards in sorted file-name order (deterministic), each opened once.
    std::map<std::string, std::vector<std::string>> by_shard;
    for (auto &[tensor, shard] : map) by_shard[shard].push_back(tensor);
    std::vector<std::unique_ptr<Source>> sources;
    for (auto &[shard, names] : by_shard) {
        std::string p = dir + "/" + shard;
        if (!file_exists(p))
            throw_error(STK_E_NOT_FOUND, "%s: shard '%s' named by the index (for tensor '%s') is missing: %s", index_path.c_str(),
                        shard.c_str(), printable(names.front()).c_str(), p.c_str());
        std::unique_ptr<Source> src = open_source(p);
        std::set<std::string> in_shard;
        for (const TensorRef &t : src->tensors()) in_shard.insert(t.name);
        for (const std::string &nme : names)
            if (!in_shard.count(nme))
                throw_error(STK_E_CORRUPT, "%s: the index places tensor '%s' in '%s', but that shard has no such tensor",
                            index_path.c_str(), printable(nme).c_str(), p.c_str());
        if (in_shard.size() != names.size()) {
            std::set<std::string> listed(names.begin(), names.end());
            for (const std::string &nme : in_shard)
                if (!listed.count(nme))
                    throw_error(STK_E_CORRUPT, "%s: shard holds tensor '%s', which the index %s does not list for it", p.c_str(),
                                printable(nme).c_str(), index_path.c_str());
        }
        sources.push_back(std::move(src));
    }
    return make_checkpoint(nullptr, std::move(sources), {index_path});
}

namespace {

// A checkpoint file known to exist: a shard index, a GGUF or one safetensors / torch file.
std::unique_ptr<Checkpoint> open_checkpoint_file(const std::string &path) {
    if (ends_with(path, ".json")) return open_sharded(path);
    MappedFile probe(path);
    if (is_gguf(probe.data(), probe.size())) {
        probe = MappedFile();
        return open_gguf_checkpoint(path);
    }
    std::vector<std::unique_ptr<Source>> one;
    one.push_back(open_source_mapped(std::move(probe), path));
    return make_checkpoint(nullptr, std::move(one), {});
}

}  // namespace

std::unique_ptr<Checkpoint> open_checkpoint(const ModelFiles &files) {
    if (files.is_gguf()) return open_gguf_checkpoint(files.gguf);
    if (files.checkpoint_refusal) std::rethrow_exception(files.checkpoint_refusal);
    if (files.checkpoint_is_gguf) return open_gguf_checkpoint(files.checkpoint);
    return open_checkpoint_file(files.checkpoint);
}

std::unique_ptr<Checkpoint> open_checkpoint(const std::string &path) {
    if (is_dir(path)) {
        static const char *kCandidates[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                            "pytorch_model.bin.index.json"};
        for (const char *c : kCandidates) {
            std::string p = path + "/" + c;
            if (file_exists(p)) return open_checkpoint(p);
        }
        if (std::string g = find_gguf(path); !g.empty()) return open_gguf_checkpoint(g);
        throw_error(STK_E_NOT_FOUND,
                    "%s: no checkpoint found (looked for model.safetensors, model.safetensors.index.json, "
                    "pytorch_model.bin, pytorch_model.bin.index.json, *.gguf)",
                    path.c_str());
    }
    if (!file_exists(path)) throw_error(STK_E_NOT_FOUND, "%s: no such checkpoint file", path.c_str());
    return open_checkpoint_file(path);
}

}  // namespace stk
