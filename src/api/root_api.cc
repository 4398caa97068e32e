// Generations roots for front ends (publish/generations.h): what a path is, the generations and
// the chain of a root, their removal (gc, remove), and where a damaged array differs from an
// intact copy in another generation.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/abi.h"
#include "core/error.h"
#include "publish/damage.h"
#include "publish/generations.h"
#include "stk/stk.h"

using namespace stk;

struct stk_generation_list {
    std::vector<GenerationInfo> gens;
};

struct stk_gc_result {
    std::vector<std::string> removed, in_use;
    uint32_t leftovers = 0;
};

namespace {

std::unique_ptr<stk_generation_list> listing(const char *root, bool chain, const char *fn) {
    if (!root) throw_error(STK_E_INVALID_ARGUMENT, "%s: NULL argument", fn);
    if (!is_generations_root(root))
        throw_error(STK_E_NOT_FOUND, "%s is not a generations root (no %s, no %s/)", root, kCurrentFileName, kGenerationsDirName);
    refuse_dangling_current(root, chain ? "there is no chain to follow" : "no generation is current");
    auto l = std::make_unique<stk_generation_list>();
    l->gens = chain ? check_root_chain(root) : list_generations(root);
    return l;
}

// Under the root's lock: the leftovers of crashed writers, then `work` (gc or one removal).
template <class Fn>
stk_gc_result *maintain(const char *root, Fn &&work) {
    auto r = std::make_unique<stk_gc_result>();
    int fd = lock_root(root);
    try {
        r->leftovers = clean_leftovers(root);
        work(*r);
    } catch (...) {
        unlock_root(fd);
        throw;
    }
    unlock_root(fd);
    return r.release();
}

const char *name_at(const std::vector<std::string> &names, uint32_t index) {
    return index < names.size() ? names[index].c_str() : nullptr;
}

}  // namespace

extern "C" {

STK_API stk_status stk_root_probe(const char *path, stk_root_info *out) {
    return guard([&] {
        if (!path || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_root_probe: NULL argument");
        abi_check_out(out);
        stk_root_info v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        v.is_root = is_generations_root(path) ? 1 : 0;
        v.needs_repair = v.is_root && current_needs_repair(path) ? 1 : 0;
        abi_write(out, v);
    });
}

STK_API stk_status stk_root_list(const char *root, stk_generation_list **out_list) {
    return guard([&] {
        if (!out_list) throw_error(STK_E_INVALID_ARGUMENT, "stk_root_list: NULL argument");
        *out_list = nullptr;
        *out_list = listing(root, false, "stk_root_list").release();
    });
}

STK_API stk_status stk_root_chain(const char *root, stk_generation_list **out_list) {
    return guard([&] {
        if (!out_list) throw_error(STK_E_INVALID_ARGUMENT, "stk_root_chain: NULL argument");
        *out_list = nullptr;
        *out_list = listing(root, true, "stk_root_chain").release();
    });
}

STK_API stk_status stk_generation_list_count(const stk_generation_list *list, uint32_t *out_count) {
    return guard([&] {
        if (!list || !out_count) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_list_count: NULL argument");
        *out_count = uint32_t(list->gens.size());
    });
}

STK_API stk_status stk_generation_list_at(const stk_generation_list *list, uint32_t index, stk_generation_entry *out) {
    return guard([&] {
        if (!list || !out) throw_error(STK_E_INVALID_ARGUMENT, "stk_generation_list_at: NULL argument");
        abi_check_out(out);
        if (index >= list->gens.size())
            throw_error(STK_E_KEY_NOT_FOUND, "stk_generation_list_at: index %u, the list holds %zu generations", index,
                        list->gens.size());
        const GenerationInfo &g = list->gens[index];
        stk_generation_entry v;
        std::memset(&v, 0, sizeof v);
        v.struct_size = sizeof v;
        if (g.name.size() >= sizeof v.name) throw_error(STK_E_INTERNAL, "generation name %s is too long", g.name.c_str());
        std::memcpy(v.name, g.name.c_str(), g.name.size() + 1);
        v.seq = g.seq;
        v.readable = g.readable, v.current = g.current, v.on_chain = g.on_chain;
        std::memcpy(v.curr_hash, g.curr_hash, 32);
        std::memcpy(v.prev_hash, g.prev_hash, 32);
        v.arrays = g.arrays, v.bytes = g.bytes;
        v.error = g.error.c_str();
        abi_write(out, v);
    });
}

STK_API void stk_generation_list_close(stk_generation_list *list) { delete list; }

STK_API stk_status stk_root_gc(const char *root, uint32_t keep, stk_gc_result **out_result) {
    return guard([&] {
        if (!root || !out_result) throw_error(STK_E_INVALID_ARGUMENT, "stk_root_gc: NULL argument");
        *out_result = nullptr;
        if (keep == 0) throw_error(STK_E_INVALID_ARGUMENT, "stk_root_gc: keep is at least 1 (the current generation stays)");
        *out_result = maintain(root, [&](stk_gc_result &r) { r.removed = gc_generations(root, keep, &r.in_use); });
    });
}

STK_API stk_status stk_root_remove(const char *root, const char *name, uint32_t flags, stk_gc_result **out_result) {
    return guard([&] {
        if (!root || !name || !out_result) throw_error(STK_E_INVALID_ARGUMENT, "stk_root_remove: NULL argument");
        *out_result = nullptr;
        if (flags & ~STK_REMOVE_FORCE) throw_error(STK_E_INVALID_ARGUMENT, "stk_root_remove: unknown flags 0x%x", flags);
        *out_result = maintain(root, [&](stk_gc_result &r) {
            remove_generation(root, name, (flags & STK_REMOVE_FORCE) != 0);
            r.removed.push_back(name);
        });
    });
}

STK_API stk_status stk_gc_result_counts(const stk_gc_result *result, uint32_t *out_removed, uint32_t *out_in_use,
                                        uint32_t *out_leftovers) {
    return guard([&] {
        if (!result || !out_removed || !out_in_use || !out_leftovers)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_gc_result_counts: NULL argument");
        *out_removed = uint32_t(result->removed.size());
        *out_in_use = uint32_t(result->in_use.size());
        *out_leftovers = result->leftovers;
    });
}

STK_API const char *stk_gc_result_removed(const stk_gc_result *result, uint32_t index) {
    return result ? name_at(result->removed, index) : nullptr;
}

STK_API const char *stk_gc_result_in_use(const stk_gc_result *result, uint32_t index) {
    return result ? name_at(result->in_use, index) : nullptr;
}

STK_API void stk_gc_result_close(stk_gc_result *result) { delete result; }

STK_API stk_status stk_locate_damage(const char *root, const char *file, uint64_t *out_offset, char *witness,
                                     size_t witness_cap) {
    return guard([&] {
        if (!root || !file || !out_offset || !witness || !witness_cap)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_locate_damage: NULL argument");
        *witness = 0;
        std::string who;
        if (!locate_damage(root, file, out_offset, &who))
            throw_error(STK_E_KEY_NOT_FOUND, "%s: no other generation of %s holds an intact copy of this array", file, root);
        if (who.size() >= witness_cap)
            throw_error(STK_E_INVALID_ARGUMENT, "stk_locate_damage: the generation name needs %zu bytes, witness_cap is %zu",
                        who.size() + 1, witness_cap);
        std::memcpy(witness, who.c_str(), who.size() + 1);
    });
}

}  // extern "C"
