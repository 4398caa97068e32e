// stk_verify (seed 12.7): the manifest, then every array it lists.  Arrays are verified on a few
// threads (SHA-256 of one payload cannot be split), but the result is deterministic: the failure
// reported is always the first failing array in manifest order, whatever the thread timing.
#include "publish/verify.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/parallel.h"
#include "format/array.h"
#include "format/manifest.h"
#include "publish/generations.h"

namespace stk {

namespace {

// Where a reader failed inside the file (stk::Error carries it); without one, `fallback`.
uint64_t offset_of(const Error &e, uint64_t fallback) { return e.has_offset() ? e.offset() : fallback; }

struct Failure {
    stk_status status = STK_OK;
    std::string message;
    std::string file;  // relative to the output directory
    uint64_t offset = 0;
};

// Header fields, for mismatches between an array's header and its manifest entry.
constexpr uint64_t kHdrDtype = 4, kHdrRank = 6, kHdrDims = 8, kHdrByteLen = 48, kHdrCrc = 56, kHdrSha = 64, kHdrFlags = 72;

void verify_one(const std::string &out_dir, const ManifestArray &e, Failure &f) {
    std::string rel = std::string(kArraysDirName) + "/" + e.name;
    std::string path = out_dir + "/" + rel;
    f.file = rel;
    if (!file_exists(path)) {
        f.status = STK_E_MISSING_ARRAY;
        f.offset = 0;
        f.message = format("%s: array %s listed in the manifest is missing", path.c_str(), e.name);
        return;
    }
    uint64_t file_size = 0;
    try {
        MappedFile m(path, false);
        file_size = m.size();
        m.will_need(0, m.size());
        ArrayHeader h = decode_array_header(m.data(), m.size(), path);
        auto differ = [&](uint64_t off, stk_status s, const char *what, unsigned long long have, unsigned long long want) {
            throw_at(s, path, off, "header %s %llu, the manifest says %llu", what, have, want);
        };
        if (h.dtype != e.dtype) differ(kHdrDtype, STK_E_SIZE_MISMATCH, "dtype", h.dtype, e.dtype);
        if (h.rank != e.rank) differ(kHdrRank, STK_E_SIZE_MISMATCH, "rank", h.rank, e.rank);
        for (uint32_t i = 0; i < kMaxRank; i++)
            if (h.dims[i] != e.dims[i]) differ(kHdrDims + 8 * i, STK_E_SIZE_MISMATCH, "dims entry", h.dims[i], e.dims[i]);
        if (h.byte_len != e.byte_len) differ(kHdrByteLen, STK_E_SIZE_MISMATCH, "byte_len", h.byte_len, e.byte_len);
        if (h.flags != e.flags) differ(kHdrFlags, STK_E_BAD_HEADER, "flags", h.flags, e.flags);
        if (h.crc32c != e.crc32c) differ(kHdrCrc, STK_E_CHECKSUM, "crc32c", h.crc32c, e.crc32c);
        if (h.sha256_low64 != e.sha256_low64) differ(kHdrSha, STK_E_CHECKSUM, "sha256_low64", h.sha256_low64, e.sha256_low64);
        verify_array_payload(h, m.data() + kArrayHeaderSize, path, &m);
    } catch (const Error &err) {
        f.status = err.status();
        f.message = err.what();
        // A file that ends early fails where it ends.
        f.offset = offset_of(err, f.status == STK_E_TRUNCATED ? file_size : 0);
    } catch (const std::bad_alloc &) {
        f.status = STK_E_NOMEM;
        f.message = path + ": out of memory";
    }
}

void fill(stk_verify_report *r, const Failure &f) {
    if (!r) return;
    std::snprintf(r->failed_file, sizeof r->failed_file, "%s", f.file.c_str());
    r->failed_offset = f.offset;
}

}  // namespace

unsigned verify_default_threads() {
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : (hw > 8 ? 8 : hw);
}

void verify_generation(const std::string &out_dir, stk_verify_report *report, unsigned threads) {
    if (report) {
        size_t keep = report->struct_size;
        std::memset(report, 0, sizeof *report);
        report->struct_size = keep;
    }
    const std::string mpath = out_dir + "/" + kManifestFileName;
    Manifest man;
    {
        Failure f;
        f.file = kManifestFileName;
        if (!file_exists(mpath)) {
            f.status = STK_E_NOT_FOUND;
            f.message = format("%s: no published generation here (no %s)", out_dir.c_str(), kManifestFileName);
        } else {
            try {
                MappedFile m(mpath, false);
                man = decode_manifest(m.data(), m.size(), mpath);
            } catch (const Error &err) {
                f.status = err.status();
                f.message = err.what();
                f.offset = offset_of(err, 0);
            }
        }
        if (f.status != STK_OK) {
            fill(report, f);
            throw Error(f.status, f.message);
        }
    }

    const uint32_t n = uint32_t(man.arrays.size());
    std::vector<Failure> failures(n);
    std::atomic<uint32_t> next{0}, first_fail{n};
    // Every array is verified (a second damaged or missing file is reported too, not only the
    // first); the first failure in manifest order is the one the report names.
    auto worker = [&] {
        for (;;) {
            uint32_t i = next.fetch_add(1);
            if (i >= n) return;
            verify_one(out_dir, man.arrays[i], failures[i]);
            if (failures[i].status != STK_OK) {
                uint32_t cur = first_fail.load();
                while (i < cur && !first_fail.compare_exchange_weak(cur, i)) {
                }
            }
        }
    };
    uint64_t total = 0;
    for (const ManifestArray &a : man.arrays)
        if (!add_ok(total, a.byte_len, &total)) total = ~0ull;
    if (threads == 0) threads = 1;
    if (threads > n) threads = n;
    if (total < (8u << 20)) threads = 1;  // small generations: thread start-up costs more than it saves
    run_workers(threads, [&](unsigned) { worker(); });

    uint32_t bad = first_fail.load();
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < bad && i < n; i++) bytes += man.arrays[i].byte_len;
    if (report) {
        report->arrays_checked = bad;
        report->bytes_checked = bytes;
    }
    if (bad < n) {
        fill(report, failures[bad]);
        std::string msg = failures[bad].message;
        std::vector<uint32_t> more;
        for (uint32_t i = bad + 1; i < n; i++)
            if (failures[i].status != STK_OK) more.push_back(i);
        if (!more.empty()) {
            msg += format("; %zu more array%s failed:", more.size(), more.size() == 1 ? "" : "s");
            for (uint32_t i : more) msg += "\n  " + failures[i].message;
        }
        throw Error(failures[bad].status, msg);
    }
}

std::string verify_path(const std::string &path, stk_verify_report *report, unsigned threads) {
    CurrentPointer cp;
    bool root = false;
    std::string dir;
    // A root: the generation CURRENT names is pinned (a shared lock gc respects) for as long as
    // it is read; one removed between reading CURRENT and pinning it means CURRENT moved on: read
    // it again.
    GenerationPin pin;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (report) std::snprintf(report->failed_file, sizeof report->failed_file, "%s", kManifestFileName);
        throw_error(STK_E_NOT_FOUND, "%s: %s", path.c_str(),
                    errno == ENOENT || errno == ENOTDIR ? "no such directory" : "not a directory");
    }
    for (int attempt = 0;; attempt++) {
        try {
            dir = resolve_generation(path, &cp, &root);
        } catch (const Error &e) {
            if (report) {
                std::snprintf(report->failed_file, sizeof report->failed_file, "%s", kCurrentFileName);
                report->failed_offset = e.has_offset() ? e.offset() : 0;
            }
            throw;
        }
        if (!root || pin.pin(dir) || attempt == 8) break;
    }
    if (!root) {
        verify_generation(dir, report, threads);
        return dir;
    }
    std::string prefix = std::string(kGenerationsDirName) + "/" + cp.name + "/";
    try {
        verify_generation(dir, report, threads);
    } catch (const Error &) {
        if (report) {
            std::string rel = prefix + report->failed_file;
            std::snprintf(report->failed_file, sizeof report->failed_file, "%s", rel.c_str());
        }
        throw;
    }
    Manifest m = read_manifest(dir + "/" + kManifestFileName);
    if (std::memcmp(m.curr_hash, cp.curr_hash, 32) != 0) {
        if (report) {
            std::snprintf(report->failed_file, sizeof report->failed_file, "%s", kCurrentFileName);
            report->failed_offset = 0;
        }
        throw_error(STK_E_CHECKSUM, "%s/%s names curr_hash %s, but %s holds %s", path.c_str(), kCurrentFileName,
                    hex32(cp.curr_hash).c_str(), dir.c_str(), hex32(m.curr_hash).c_str());
    }
    return dir;
}

}  // namespace stk
