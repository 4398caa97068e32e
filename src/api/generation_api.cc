// stk_generation_open / stk_lookup / stk_generation_close / stk_generation_array_*: the C entry points of the O(1)
// lookups (runtime/lookup.cc holds their bodies).  Opening verifies the generation first.
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "core/abi.h"
#include "core/error.h"
#include "publish/verify.h"
#include "runtime/generation.h"
#include "stk/stk.h"

namespace {

bool is_dir_present(const std::string &dir) {
    struct stat st;
    return !dir.empty() && ::stat(dir.c_str(), &st) == 0;
}

}  // namespace

using namespace stk;

extern "C" {

STK_API stk_status stk_generation_open(const char *out_dir, stk_generation **out_gen) {
    return guard([&] {
        if (!out_dir || !out_gen) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_open: NULL argument");
        *out_gen = nullptr;
        // A root: CURRENT is read once and that generation pinned: its files stay mapped (valid)
        // when a newer one is published or this one removed.  A removal between reading CURRENT
        // and mapping shows as a missing file: CURRENT is read again (a few times at most).
        for (int attempt = 0;; attempt++) {
            std::string dir;
            try {
                dir =
                    verify_path(out_dir, nullptr, verify_default_threads());  // manifest, schema digest, every array's checksums
                *out_gen = map_generation(dir).release();
                return;
            } catch (const Error &e) {
                bool vanished = e.status() == STK_E_NOT_FOUND || e.status() == STK_E_MISSING_ARRAY;
                if (!vanished || attempt >= 3 || dir == out_dir || is_dir_present(dir)) throw;
            }
        }
    });
}

STK_API void stk_generation_close(stk_generation *gen) { delete gen; }

STK_API stk_status stk_generation_dir(const stk_generation *gen, const char **out_dir) {
    return guard([&] {
        if (!gen || !out_dir) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_dir: NULL argument");
        *out_dir = gen->dir.c_str();
    });
}

STK_API stk_status stk_generation_array_count(const stk_generation *gen, uint32_t *out_count) {
    return guard([&] {
        if (!gen || !out_count) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_array_count: NULL argument");
        *out_count = uint32_t(gen->manifest.arrays.size());
    });
}

static void check_view(const stk_array_view *out, const char *fn) {
    if (!out) throw_error(STK_E_INVALID_ARGUMENT, "%s: NULL argument", fn);
    abi_check_out(out);
}

// Today's view of array `index` into the caller's struct (its struct_size: core/abi.h).
static void fill_view(const stk_generation &g, uint32_t index, stk_array_view *out) {
    stk_array_view v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    generation_array(g, index, v);
    abi_write(out, v);
}

STK_API stk_status stk_generation_array_at(const stk_generation *gen, uint32_t index, stk_array_view *out) {
    return guard([&] {
        if (!gen) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_array_at: NULL argument");
        check_view(out, "stk_generation_array_at");
        fill_view(*gen, index, out);
    });
}

STK_API stk_status stk_generation_array_find(const stk_generation *gen, const char *name, stk_array_view *out) {
    return guard([&] {
        if (!gen || !name) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_array_find: NULL argument");
        check_view(out, "stk_generation_array_find");
        const auto &arrays = gen->manifest.arrays;
        for (uint32_t i = 0; i < arrays.size(); i++)
            if (std::strlen(name) < sizeof arrays[i].name && std::strncmp(arrays[i].name, name, sizeof arrays[i].name) == 0) {
                fill_view(*gen, i, out);
                return;
            }
        throw_error(STK_E_KEY_NOT_FOUND, "%s: no array %s in the manifest", gen->dir.c_str(), name);
    });
}

STK_API stk_status stk_lookup(const stk_generation *gen, stk_lookup_kind kind, const void *key, size_t key_len, void *value,
                              size_t value_cap, size_t *value_len) {
    return guard([&] {
        if (!gen) throw_error(STK_E_INVALID_ARGUMENT, "stk_lookup: gen is NULL");
        generation_lookup(*gen, kind, key, key_len, value, value_cap, value_len);
    });
}
}
