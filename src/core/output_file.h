// Write-once output files: bytes go to a hidden temporary file in the destination directory,
// are fsynced, and only then renamed over the final name (and the directory fsynced).  A crash or
// an error leaves at most a ".*.tmp" file, never a truncated file under the final name.
//
// Every operation that decides what survives a crash (create, write, fsync, link, rename, mkdir,
// unlink, rmdir, directory fsync) goes through this file, so that the crash-safety tests can see
// and interrupt them in one place (docs/decisions.md, "Publication", the test-only hook):
//   STK_TEST_FS_TRACE=FILE  appends one line per completed operation to FILE:
//                           "<n> <op> <path> [<path2>|<bytes>]"  (n counts from 1)
//   STK_TEST_CRASH_AT=N     the process SIGKILLs itself instead of performing operation N
//   STK_TEST_CRASH_SIGNAL=S with CRASH_AT: raise signal number S instead of SIGKILL (tests of
//                           the tool's cleanup on SIGINT / SIGTERM / SIGBUS, src/cli/cleanup.h)
// Both are read once per process; without them the cost is one branch per operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stk {

class OutputFile {
public:
    // Creates "<dir>/.<name>.tmp.<pid>"; throws STK_E_IO naming the path.
    explicit OutputFile(const std::string &final_path);
    ~OutputFile();  // discards (unlinks) the temporary file unless commit() succeeded
    OutputFile(const OutputFile &) = delete;
    OutputFile &operator=(const OutputFile &) = delete;

    void write(const void *data, size_t len);                    // sequential append
    void pwrite(const void *data, size_t len, uint64_t offset);  // header patch before commit
    // Sequential append of `len` zero bytes, allocated (fallocate; written where the file system
    // lacks it), never a hole: on a full disk this fails with ENOSPC here instead of a reader's
    // SIGBUS later.  Traced as a write.
    void write_zeros(uint64_t len);
    void pread(void *data, size_t len, uint64_t offset) const;  // read back before commit (18.5)
    uint64_t size() const { return size_; }
    // Bytes handed to write() and pwrite() so far (tests: 18.5 writes a payload exactly once).
    uint64_t bytes_written() const { return written_; }
    // fsync, rename to the final name, fsync the directory.  Refuses to replace an existing file
    // (write-once) with STK_E_OUTPUT_EXISTS.
    void commit();
    // The same steps on `queue`'s thread, later (see CommitQueue); this object lets go of the file.
    void commit_later(class CommitQueue &queue);
    const std::string &path() const { return final_; }

private:
    std::string final_;
    std::string tmp_;
    int fd_ = -1;
    uint64_t size_ = 0;
    uint64_t written_ = 0;
    bool committed_ = false;
};

// Commits that wait for the disk on a thread of their own.  A file handed over (OutputFile::
// commit_later) goes through exactly OutputFile::commit's steps, in the order files were handed
// over - fsync, link to its final name, unlink the temporary, fsync the directory - while the
// caller computes on: a conversion's fsyncs (0.2-0.5 s on the real models) then overlap its next
// stages instead of stalling them.  Only for files whose names nobody resolves before drain()
// (a job publishing into a root writes into a staging directory: docs/decisions.md,
// "Publication").  The first failure stops the queue: later files are discarded (temporaries
// unlinked), and drain() throws it, naming the file.
// Its calls come from one thread (the job's); only the commits run on the queue's own.  A queue
// that was never handed a file holds nothing (no thread, no allocation).
class CommitQueue {
public:
    CommitQueue();
    ~CommitQueue();
    CommitQueue(const CommitQueue &) = delete;
    CommitQueue &operator=(const CommitQueue &) = delete;
    // Commits what is queued and ends the thread; a failure not drained is dropped (the caller is
    // abandoning the directory).  Nothing may be handed over after it.
    void close() noexcept;
    // Returns once every file handed over so far is committed; rethrows the first failure.
    void drain();
    // The final paths of every file handed over so far, in order (committed or not).
    std::vector<std::string> handed_over() const;

private:
    friend class OutputFile;
    struct State;  // the thread and its queue (output_file.cc): this header stays light
    void push(int fd, const std::string &tmp, const std::string &final_path);
    // Owned, made by the first push.  (A raw pointer: <memory> here would reach test files that
    // include this after cmocka's fail() macro.)
    State *st_;
};

// mkdir -p; throws STK_E_IO.
void make_dirs(const std::string &path);
// Whole buffer to a new file, write-once, as OutputFile.
void write_file_once(const std::string &path, const void *data, size_t len);

// The traced durability operations the publisher uses (each throws STK_E_IO naming the path,
// except where said).
void durable_rename(const std::string &from, const std::string &to);  // rename(2), replaces `to`
void durable_fsync_dir(const std::string &dir);
void durable_mkdir(const std::string &dir);         // one level; an existing directory is fine
void durable_unlink(const std::string &path);       // a missing file is fine
void durable_rmdir(const std::string &dir);         // a missing directory is fine
void durable_remove_tree(const std::string &path);  // rm -r (no symlinks followed)
// A small file replaced atomically: path.tmp written, fsynced, renamed over path, dir fsynced.
void durable_replace_file(const std::string &path, const void *data, size_t len);

std::string dir_of(const std::string &path);
std::string base_of(const std::string &path);

}  // namespace stk
