#include "publish/generations.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "format/manifest.h"
#include "publish/verify.h"

namespace stk {

namespace {

bool is_dir(const std::string &p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> entries(const std::string &dir) {
    std::vector<std::string> out;
    DIR *d = ::opendir(dir.c_str());
    if (!d) return out;
    while (struct dirent *e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

bool starts_with(const std::string &s, const char *p) { return s.compare(0, std::strlen(p), p) == 0; }

std::string gens_dir(const std::string &root) { return root + "/" + kGenerationsDirName; }

}  // namespace

bool is_generations_root(const std::string &dir) {
    struct stat st;
    return ::lstat((dir + "/" + kCurrentFileName).c_str(), &st) == 0 || is_dir(gens_dir(dir));
}

bool parse_generation_name(const std::string &name, uint64_t *seq) {
    size_t dash = name.find('-');
    if (dash == std::string::npos || dash < 6 || dash > 19 || name.size() != dash + 17) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < dash; i++) {
        if (name[i] < '0' || name[i] > '9') return false;
        v = v * 10 + uint64_t(name[i] - '0');
    }
    for (size_t i = dash + 1; i < name.size(); i++)
        if (hex_digit(name[i]) < 0) return false;
    if (v == 0) return false;
    if (seq) *seq = v;
    return true;
}

CurrentPointer parse_current(const char *p, size_t n, const std::string &path) {
    if (n > kMaxCurrentBytes || n < 67 || p[n - 1] != '\n')
        throw_at(STK_E_CORRUPT, path, 0, "%zu bytes: CURRENT is \"<generation name> <64 hex digits>\\n\"", n);
    std::string text(p, n - 1);
    size_t sp = text.find(' ');
    uint64_t seq;
    if (sp == std::string::npos || text.size() != sp + 65 || !parse_generation_name(text.substr(0, sp), &seq))
        throw_at(STK_E_CORRUPT, path, 0, "CURRENT is \"<generation name> <64 hex digits>\\n\", not \"%.80s\"", text.c_str());
    CurrentPointer out;
    for (int i = 0; i < 32; i++) {
        int hi = hex_digit(text[sp + 1 + 2 * i]), lo = hex_digit(text[sp + 2 + 2 * i]);
        if (hi < 0 || lo < 0) throw_at(STK_E_CORRUPT, path, sp + 1 + 2 * i, "curr_hash is 64 lower-case hex digits");
        out.curr_hash[i] = uint8_t(hi * 16 + lo);
    }
    out.name = text.substr(0, sp);
    if (out.name.compare(out.name.size() - 16, 16, hex32(out.curr_hash).substr(0, 16)) != 0)
        throw_at(STK_E_CORRUPT, path, 0, "generation name %s does not end in the first 16 hex digits of its curr_hash",
                 out.name.c_str());
    return out;
}

std::string encode_current(const std::string &name, const uint8_t curr_hash[32]) { return name + " " + hex32(curr_hash) + "\n"; }

bool read_current(const std::string &root, CurrentPointer *out) {
    std::string path = root + "/" + kCurrentFileName;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return false;
    MappedFile f(path, false);  // a symbolic link is refused: CURRENT is a plain file stk wrote
    *out = parse_current(reinterpret_cast<const char *>(f.data()), size_t(f.size()), path);
    return true;
}

void refuse_dangling_current(const std::string &root, const char *consequence) {
    CurrentPointer cp;
    if (!read_current(root, &cp) || is_dir(gens_dir(root) + "/" + cp.name)) return;
    throw_error(STK_E_NOT_FOUND,
                "%s/%s points to a missing generation %s (no %s/%s/%s): %s. The next stk convert into %s repairs "
                "%s: it points it at the newest generation that verifies and chains onto it, or starts a new "
                "chain when none is left (and says which)",
                root.c_str(), kCurrentFileName, cp.name.c_str(), root.c_str(), kGenerationsDirName, cp.name.c_str(), consequence,
                root.c_str(), kCurrentFileName);
}

std::string resolve_generation(const std::string &path, CurrentPointer *pointer, bool *is_root) {
    bool root = !file_exists(path + "/" + kManifestFileName) && is_generations_root(path);
    if (is_root) *is_root = root;
    if (!root) return path;
    CurrentPointer cp;
    if (!read_current(path, &cp)) {
        const std::vector<std::string> names = entries(gens_dir(path));
        if (!names.empty())
            throw_error(STK_E_NOT_FOUND,
                        "%s: a generations root with %zu entr%s in %s/ but no %s: the pointer to the current "
                        "generation was deleted; the next stk convert into it points %s at the newest "
                        "generation that verifies",
                        path.c_str(), names.size(), names.size() == 1 ? "y" : "ies", kGenerationsDirName, kCurrentFileName,
                        kCurrentFileName);
        throw_error(STK_E_NOT_FOUND, "%s: a generations root with no current generation (no %s)", path.c_str(), kCurrentFileName);
    }
    refuse_dangling_current(path, "there is no current generation to read");
    if (pointer) *pointer = cp;
    return gens_dir(path) + "/" + cp.name;
}

std::vector<GenerationInfo> list_generations(const std::string &root) {
    std::vector<GenerationInfo> out;
    for (const std::string &name : entries(gens_dir(root))) {
        GenerationInfo g;
        if (!parse_generation_name(name, &g.seq) || !is_dir(gens_dir(root) + "/" + name)) continue;
        g.name = name;
        std::string mpath = gens_dir(root) + "/" + name + "/" + kManifestFileName;
        stk_status s = guard([&] {
            Manifest m = read_manifest(mpath);
            std::memcpy(g.curr_hash, m.curr_hash, 32);
            std::memcpy(g.prev_hash, m.prev_hash, 32);
            g.arrays = m.arrays.size();
            for (const ManifestArray &a : m.arrays) g.bytes += a.byte_len;
        });
        g.readable = s == STK_OK;
        if (!g.readable) g.error = last_error();
        out.push_back(g);
    }
    std::sort(out.begin(), out.end(), [](const GenerationInfo &a, const GenerationInfo &b) { return a.seq < b.seq; });
    CurrentPointer cp;
    bool has_current = false;
    guard([&] { has_current = read_current(root, &cp); });
    if (!has_current) return out;
    // Walk the chain from the current generation back through prev_hash.
    const GenerationInfo *cur = nullptr;
    for (GenerationInfo &g : out)
        if (g.name == cp.name) {
            g.current = true;
            cur = &g;
        }
    while (cur && cur->readable) {
        const_cast<GenerationInfo *>(cur)->on_chain = true;
        const GenerationInfo *prev = nullptr;
        for (const GenerationInfo &g : out)
            if (g.readable && !g.on_chain && g.seq < cur->seq && std::memcmp(g.curr_hash, cur->prev_hash, 32) == 0) prev = &g;
        cur = prev;
    }
    return out;
}

std::vector<GenerationInfo> check_root_chain(const std::string &root) {
    CurrentPointer cp;
    if (!read_current(root, &cp))
        throw_error(STK_E_NOT_FOUND, "%s: a generations root with no current generation (no %s)", root.c_str(), kCurrentFileName);
    std::vector<GenerationInfo> all = list_generations(root);
    std::vector<GenerationInfo> chain;
    const GenerationInfo *cur = nullptr;
    for (const GenerationInfo &g : all)
        if (g.name == cp.name) cur = &g;
    if (!cur)
        throw_error(STK_E_MISSING_ARRAY, "%s/%s names generation %s, which is not in %s/", root.c_str(), kCurrentFileName,
                    cp.name.c_str(), kGenerationsDirName);
    if (!cur->readable) throw_error(STK_E_CORRUPT, "current generation %s: %s", cur->name.c_str(), cur->error.c_str());
    if (std::memcmp(cur->curr_hash, cp.curr_hash, 32) != 0)
        throw_error(STK_E_CHECKSUM, "%s/%s says curr_hash %s, but generation %s has %s", root.c_str(), kCurrentFileName,
                    hex32(cp.curr_hash).c_str(), cur->name.c_str(), hex32(cur->curr_hash).c_str());
    while (cur) {
        chain.push_back(*cur);
        const GenerationInfo *prev = nullptr;
        for (const GenerationInfo &g : all)
            if (g.readable && std::memcmp(g.curr_hash, cur->prev_hash, 32) == 0) prev = &g;
        if (prev && prev->seq >= cur->seq)
            throw_error(STK_E_CHECKSUM, "generation chain broken: %s names %s as the one it replaced, which is not older",
                        cur->name.c_str(), prev->name.c_str());
        cur = prev;
    }
    return chain;
}

int lock_root(const std::string &root) {
    std::string path = root + "/" + kLockFileName;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail_errno("cannot open the root's lock file " + path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        ::close(fd);
        if (e == EWOULDBLOCK)
            throw_error(STK_E_IO,
                        "%s is being written by another process (it holds %s); one writer at a time: wait for it "
                        "and retry",
                        root.c_str(), path.c_str());
        errno = e;
        fail_errno("cannot lock " + path);
    }
    return fd;
}

void unlock_root(int fd) {
    if (fd >= 0) ::close(fd);  // closing the only descriptor releases the flock
}

uint32_t clean_leftovers(const std::string &root) {
    uint32_t n = 0;
    for (const std::string &e : entries(root)) {
        if (starts_with(e, kStagingPrefix) || starts_with(e, kTrashPrefix) || e == std::string(kCurrentFileName) + ".tmp") {
            durable_remove_tree(root + "/" + e);
            n++;
        }
    }
    if (n) durable_fsync_dir(root);
    return n;
}

bool is_dir_plain(const std::string &path) { return is_dir(path); }

bool current_needs_repair(const std::string &root) {
    bool any = false;
    for (const std::string &e : entries(gens_dir(root))) any |= parse_generation_name(e, nullptr);
    CurrentPointer cp;
    bool has = false;
    if (guard([&] { has = read_current(root, &cp); }) != STK_OK) return false;  // a malformed CURRENT is refused, not repaired
    if (has) return !is_dir(gens_dir(root) + "/" + cp.name);  // dangling, whether or not other generations are left
    return any;
}

std::string newest_valid_generation(const std::string &root) {
    std::vector<GenerationInfo> all = list_generations(root);
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
        if (!it->readable) continue;
        if (guard([&] { verify_generation(gens_dir(root) + "/" + it->name, nullptr, verify_default_threads()); }) == STK_OK)
            return it->name;
    }
    return "";
}

bool repair_current(const std::string &root, CurrentPointer *out) {
    struct stat st;
    const std::string path = root + "/" + kCurrentFileName;
    const std::string name = newest_valid_generation(root);
    if (name.empty()) return false;
    Manifest m = read_manifest(gens_dir(root) + "/" + name + "/" + kManifestFileName);
    if (::lstat(path.c_str(), &st) == 0) durable_unlink(path);  // a dangling link
    const std::string text = encode_current(name, m.curr_hash);
    durable_replace_file(path, text.data(), text.size());
    out->name = name;
    std::memcpy(out->curr_hash, m.curr_hash, 32);
    return true;
}

void probe_writable_dir(const std::string &dir) {
    const std::string probe = dir + "/.probe-" + std::to_string(::getpid());
    if (::mkdir(probe.c_str(), 0700) != 0 && errno != EEXIST)
        fail_errno(dir + " is not writable: a conversion could not publish into it; nothing was written");
    ::rmdir(probe.c_str());
}

std::string make_staging_dir(const std::string &root) {
    static std::atomic<uint32_t> counter{0};
    std::string path = root + "/" + kStagingPrefix + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    durable_remove_tree(path);
    durable_mkdir(path);
    return path;
}

std::string publish_staged(const std::string &root, const std::string &staging, const uint8_t curr_hash[32]) {
    uint64_t seq = 0;
    for (const std::string &e : entries(gens_dir(root))) {
        uint64_t s;
        if (parse_generation_name(e, &s) && s > seq) seq = s;
    }
    char name[40];
    std::snprintf(name, sizeof name, "%06llu-%s", (unsigned long long)(seq + 1), hex32(curr_hash).substr(0, 16).c_str());
    std::string final_dir = gens_dir(root) + "/" + name;
    // 1. The generation's own files are durable (every commit fsynced its file and directory);
    //    the rename makes it a generation, and fsyncing both directories makes that durable
    //    before anything points at it.
    durable_rename(staging, final_dir);
    durable_fsync_dir(gens_dir(root));
    durable_fsync_dir(root);
    // 2. The swap: CURRENT.tmp written and fsynced, renamed over CURRENT, the root fsynced.
    std::string text = encode_current(name, curr_hash);
    try {
        durable_replace_file(root + "/" + kCurrentFileName, text.data(), text.size());
    } catch (const Error &) {
        // A swap that did not happen (ENOSPC writing CURRENT.tmp, say) leaves CURRENT as it was:
        // the new generation would be an orphan and CURRENT.tmp a leftover.  Both go, unless
        // CURRENT already names the new generation (the failure came after the rename).
        CurrentPointer cp;
        bool swapped = false;
        guard([&] { swapped = read_current(root, &cp) && cp.name == name; });
        if (!swapped) {
            guard([&] { durable_unlink(root + "/" + kCurrentFileName + ".tmp"); });
            guard([&] {
                const std::string trash = root + "/" + kTrashPrefix + name;
                durable_rename(final_dir, trash);
                durable_remove_tree(trash);
                durable_fsync_dir(root);
            });
        }
        throw;
    }
    return name;
}

GenerationPin::~GenerationPin() {
    if (fd_ >= 0) ::close(fd_);
}

bool GenerationPin::pin(const std::string &dir) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd_ < 0) return false;
    // Blocks only while a remover holds it (between its lock and its rename: a moment).
    struct stat a, b;
    if (::flock(fd_, LOCK_SH) != 0 || ::fstat(fd_, &a) != 0 || ::stat(dir.c_str(), &b) != 0 || a.st_ino != b.st_ino ||
        a.st_dev != b.st_dev) {
        ::close(fd_);
        fd_ = -1;
        return false;
    }
    return true;
}

namespace {

// The remover's side of GenerationPin: an exclusive lock on the directory, or false (in use).
int lock_generation_exclusive(const std::string &dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) fail_errno("cannot open " + dir);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        ::close(fd);
        if (e == EWOULDBLOCK) return -1;
        errno = e;
        fail_errno("cannot lock " + dir);
    }
    return fd;
}

}  // namespace

void remove_generation(const std::string &root, const std::string &name, bool force) {
    uint64_t seq;
    if (!parse_generation_name(name, &seq)) throw_error(STK_E_INVALID_ARGUMENT, "'%s' is not a generation name", name.c_str());
    std::vector<GenerationInfo> all = list_generations(root);
    const GenerationInfo *g = nullptr;
    bool older_on_chain = false, newer_on_chain = false;
    for (const GenerationInfo &x : all) {
        if (x.name == name) g = &x;
        if (x.on_chain && x.seq < seq) older_on_chain = true;
        if (x.on_chain && x.seq > seq) newer_on_chain = true;
    }
    if (!g) throw_error(STK_E_NOT_FOUND, "%s/%s/%s: no such generation", root.c_str(), kGenerationsDirName, name.c_str());
    if (g->current) throw_error(STK_E_INVALID_ARGUMENT, "%s is the current generation: it is never removed", name.c_str());
    if (g->on_chain && older_on_chain && newer_on_chain && !force)
        throw_error(STK_E_INVALID_ARGUMENT,
                    "%s links an older and a newer generation of the chain stk check follows: removing it "
                    "cuts the chain; it is removed only when forced",
                    name.c_str());
    // Not while a reader holds it (stk check verifying it by path).
    const int held = lock_generation_exclusive(gens_dir(root) + "/" + name);
    if (held < 0)
        throw_error(STK_E_IO,
                    "%s/%s/%s is being read by another process (stk check, stk replay): not removed; try "
                    "again when it is done",
                    root.c_str(), kGenerationsDirName, name.c_str());
    struct Close {
        int fd;
        ~Close() { ::close(fd); }
    } close_held{held};
    // Out of sight first (readers resolve only CURRENT and generations/), then deleted.
    std::string trash = root + "/" + kTrashPrefix + name;
    durable_remove_tree(trash);
    durable_rename(gens_dir(root) + "/" + name, trash);
    durable_fsync_dir(gens_dir(root));
    durable_fsync_dir(root);
    durable_remove_tree(trash);
    durable_fsync_dir(root);
}

std::vector<std::string> gc_generations(const std::string &root, uint32_t keep, std::vector<std::string> *in_use) {
    if (keep == 0) keep = 1;
    refuse_dangling_current(root, "gc keeps the current generation and the chain behind it, and there is none: nothing removed");
    std::vector<GenerationInfo> all = list_generations(root);
    // No CURRENT: nothing is on a chain, so every generation would look like an orphan.
    bool has_current = false;
    for (const GenerationInfo &g : all) has_current |= g.current;
    if (!all.empty() && !has_current)
        throw_error(STK_E_NOT_FOUND,
                    "%s has %zu generation%s but no valid %s (deleted, or naming a generation that is not "
                    "there): gc would remove them all; nothing removed. The next stk convert into it "
                    "points %s at the newest generation that verifies",
                    root.c_str(), all.size(), all.size() == 1 ? "" : "s", kCurrentFileName, kCurrentFileName);
    std::vector<std::string> removed;
    uint32_t kept = 0;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {  // newest first
        bool drop = !it->on_chain || kept >= keep;
        if (it->current) drop = false;
        if (it->on_chain && !drop) kept++;
        if (!drop) continue;
        // Oldest-side chain members: never cuts the kept part.  One a reader holds stays.
        const int held = lock_generation_exclusive(gens_dir(root) + "/" + it->name);
        if (held < 0) {
            if (in_use) in_use->push_back(it->name);
            continue;
        }
        ::close(held);
        try {
            remove_generation(root, it->name, true);
        } catch (const Error &e) {
            if (e.status() != STK_E_IO || !in_use) throw;  // pinned between the two looks
            in_use->push_back(it->name);
            continue;
        }
        removed.push_back(it->name);
    }
    return removed;
}

}  // namespace stk
