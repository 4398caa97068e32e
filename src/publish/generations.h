// A generations root (docs/format.md "Generations root", docs/decisions.md "Publication"):
//
//   ROOT/CURRENT                 "<name> <curr_hash hex>\n": the current generation
//   ROOT/generations/<name>/     sera_manifest.bin + arrays/, one directory per generation
//   ROOT/LOCK                    flock(2)ed by the one writer (convert, gc, remove)
//   ROOT/.staging-<pid>-<n>/     a conversion being built (never read; a leftover is a crash)
//   ROOT/.trash-<name>           a generation being removed (never read; a leftover is a crash)
//
// <name> is "<seq>-<first 16 hex digits of curr_hash>", seq a decimal of at least 6 digits
// counting from 000001, so that names sort in publication order.  A conversion builds into a
// staging directory, the check stage verifies it, and publish_staged renames it into
// generations/ and then swaps CURRENT (rename of a fully written, fsynced file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stk/stk.h"

namespace stk {

constexpr const char *kCurrentFileName = STK_CURRENT_FILE_NAME;  // stk.h names the files for front ends
constexpr const char *kGenerationsDirName = STK_GENERATIONS_DIR_NAME;
constexpr const char *kLockFileName = STK_LOCK_FILE_NAME;
constexpr const char *kStagingPrefix = STK_STAGING_PREFIX;
constexpr const char *kTrashPrefix = ".trash-";
constexpr size_t kMaxCurrentBytes = 128;

// A directory is a root when it holds CURRENT or generations/.
bool is_generations_root(const std::string &dir);

// "000012-0123456789abcdef": true when `name` has that form (sets *seq).
bool parse_generation_name(const std::string &name, uint64_t *seq);

struct CurrentPointer {
    std::string name;
    uint8_t curr_hash[32] = {};
};
// Reads ROOT/CURRENT: false when there is none (an empty root); STK_E_CORRUPT naming the file
// when its bytes are not exactly "<name> <64 hex>\n".
bool read_current(const std::string &root, CurrentPointer *out);
// The bytes of CURRENT: the parser read_current uses (STK_E_CORRUPT naming `path` and the
// offset; fuzz/current_pointer.cc) and the one encoder of what the publisher writes.
CurrentPointer parse_current(const char *p, size_t n, const std::string &path);
std::string encode_current(const std::string &name, const uint8_t curr_hash[32]);

// What a reader opens for `path`: a root -> its current generation's directory (CURRENT read
// once; *pointer filled); anything else -> path itself.  STK_E_NOT_FOUND for a root with no
// current generation.
std::string resolve_generation(const std::string &path, CurrentPointer *pointer = nullptr, bool *is_root = nullptr);

struct GenerationInfo {
    std::string name;
    uint64_t seq = 0;
    bool readable = false;  // the manifest decoded (curr_hash matched)
    std::string error;      // why not
    uint8_t curr_hash[32] = {}, prev_hash[32] = {};
    uint64_t arrays = 0, bytes = 0;
    bool current = false;
    bool on_chain = false;  // reached from CURRENT by following prev_hash
};
// Every generations/<name> with a well-formed name, in seq order; current and on_chain set.
std::vector<GenerationInfo> list_generations(const std::string &root);

// The published history: from CURRENT back through prev_hash over the generations present.
// Throws STK_E_CHECKSUM when a link names a generation whose seq is not older, and STK_E_CHECKSUM
// when CURRENT's hash is not its generation's curr_hash.  Returns the chain, newest first; the
// last one's prev_hash is zero (the first generation) or names one that was removed.
std::vector<GenerationInfo> check_root_chain(const std::string &root);

// The single writer's lock on ROOT/LOCK (created if absent).  A second writer gets STK_E_IO
// "ROOT is being written by another process".  The fd is released by unlock_root or exit.
int lock_root(const std::string &root);
void unlock_root(int fd);

// Under the lock: removes leftovers of crashed writers (.staging-*, .trash-*, CURRENT.tmp).
// Returns how many entries it removed.
uint32_t clean_leftovers(const std::string &root);

// Creates and removes a directory entry in `dir` (".probe-<pid>"): STK_E_IO naming `dir` when
// it cannot be written (permissions, a read-only file system).  access(2) is not enough: it
// says yes to root on a read-only mount.
void probe_writable_dir(const std::string &dir);

// Under the lock, for a root that has generations but no CURRENT (deleted, or a dangling link):
// points CURRENT at the newest generation that verifies (every array hashed) and returns true
// with *out set; false when no generation verifies (or there are none).  Without it the next
// conversion would start a new chain and gc would then delete the old one as orphans.
bool repair_current(const std::string &root, CurrentPointer *out);
// True when `root` holds generations but no CURRENT, or a CURRENT naming a generation that is
// not there (with or without others left): what the next conversion repairs (repair_current, or
// a new chain when no generation verifies).  A malformed CURRENT is refused, not repaired.
bool current_needs_repair(const std::string &root);
// True if `path` is a directory (not through a symbolic link).
bool is_dir_plain(const std::string &path);
// The newest generation of `root` (by seq) that verifies, or "" (repair_current's choice).
std::string newest_valid_generation(const std::string &root);

// STK_E_NOT_FOUND when ROOT/CURRENT names a generation that is not in generations/: "ROOT/CURRENT
// points to a missing generation NAME (...): <consequence>. The next stk convert ..." (one text
// for check, the listings, gc and every reader); nothing when CURRENT is absent or resolves.
void refuse_dangling_current(const std::string &root, const char *consequence);

// Under the lock: creates ROOT/.staging-<pid>-<n> and returns its path.
std::string make_staging_dir(const std::string &root);

// Under the lock, after the staging directory verified: renames it to generations/<name> (seq =
// the highest present + 1), fsyncs, then swaps CURRENT.  Returns the name.
std::string publish_staged(const std::string &root, const std::string &staging, const uint8_t curr_hash[32]);

// A reader's pin on one generation directory: a shared flock(2) on the directory, held while
// it reads files by path (stk_verify).  remove_generation takes an exclusive non-blocking lock on
// the same directory first, so it never removes a generation a reader holds (gc skips it;
// --remove says it is in use).  pin() returns false when `dir` is gone or was replaced while it
// waited (a removal raced it): the caller reads CURRENT again.
class GenerationPin {
public:
    GenerationPin() = default;
    ~GenerationPin();
    GenerationPin(const GenerationPin &) = delete;
    GenerationPin &operator=(const GenerationPin &) = delete;
    bool pin(const std::string &dir);

private:
    int fd_ = -1;
};

// Under the lock: removes generations/<name> (rename to .trash-<name>, fsync, then delete).
// A generation a reader has pinned is not removed: STK_E_IO "is being read".
// Never the current one (STK_E_INVALID_ARGUMENT); a chain member with both an older and a newer
// chain member present only with force (it would cut the chain stk check follows).
void remove_generation(const std::string &root, const std::string &name, bool force);

// Under the lock: removes every generation not on the chain and every chain member beyond the
// newest `keep` (keep >= 1: the current one always stays).  Returns the names removed; a
// generation a reader has pinned stays (named in *in_use when given) for the next gc.
std::vector<std::string> gc_generations(const std::string &root, uint32_t keep, std::vector<std::string> *in_use = nullptr);

}  // namespace stk
