#include "publish/damage.h"

#include <algorithm>

#include "core/mapped_file.h"
#include "format/array.h"
#include "format/manifest.h"
#include "publish/generations.h"

namespace stk {

namespace {

// The first byte where the intact copy `good_path` (verified on open) and `damaged` differ.
bool first_difference(const std::string &good_path, const ManifestArray &a, const MappedFile &damaged, uint64_t *at) {
    ArrayReader good(good_path, true);  // it must verify itself
    const uint8_t *p = good.payload() - kArrayHeaderSize;
    const uint64_t n = std::min<uint64_t>(damaged.size(), kArrayHeaderSize + a.byte_len);
    for (uint64_t i = 0; i < n; i++)
        if (p[i] != damaged.data()[i]) {
            *at = i;
            return true;
        }
    return false;
}

}  // namespace

bool locate_damage(const std::string &root, const std::string &rel, uint64_t *at, std::string *witness) {
    const std::string gens = std::string(kGenerationsDirName) + "/";
    const size_t arrays = rel.find("/arrays/");
    if (rel.compare(0, gens.size(), gens) != 0 || arrays == std::string::npos) return false;
    const std::string name = rel.substr(gens.size(), arrays - gens.size()), file = rel.substr(arrays + 8);
    const Manifest bad = read_manifest(root + "/" + gens + name + "/" + kManifestFileName);
    const ManifestArray *want = nullptr;
    for (const ManifestArray &a : bad.arrays)
        if (file == a.name) want = &a;
    if (!want) return false;
    const MappedFile damaged(root + "/" + rel, false);
    for (const GenerationInfo &g : list_generations(root)) {
        if (g.name == name || !g.readable) continue;
        const Manifest other = read_manifest(root + "/" + gens + g.name + "/" + kManifestFileName);
        for (const ManifestArray &a : other.arrays) {
            if (file != a.name || a.sha256_low64 != want->sha256_low64 || a.crc32c != want->crc32c ||
                a.byte_len != want->byte_len)
                continue;
            if (first_difference(root + "/" + gens + g.name + "/arrays/" + a.name, a, damaged, at)) {
                *witness = g.name;
                return true;
            }
        }
    }
    return false;
}

}  // namespace stk
