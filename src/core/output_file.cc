#include "core/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/checked.h"
#include "core/error.h"

namespace stk {

std::string dir_of(const std::string &path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : (slash == 0 ? "/" : path.substr(0, slash));
}

std::string base_of(const std::string &path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {

// The test-only hook (see the header).  Operations are numbered in the order they complete; a
// multi-threaded writer numbers them under one lock, so a trace is a valid serial history.
struct FsTrace {
    bool on = false;
    int fd = -1;
    uint64_t crash_at = 0;
    int crash_signal = SIGKILL;
    uint64_t n = 0;
    std::mutex m;
    FsTrace() {
        const char *t = std::getenv("STK_TEST_FS_TRACE");
        const char *c = std::getenv("STK_TEST_CRASH_AT");
        if (t && *t) fd = ::open(t, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (c && *c) crash_at = std::strtoull(c, nullptr, 10);
        const char *sig = std::getenv("STK_TEST_CRASH_SIGNAL");
        if (sig && *sig) crash_signal = int(std::strtol(sig, nullptr, 10));
        on = fd >= 0 || crash_at != 0;
    }
};

FsTrace &trace() {
    static FsTrace t;
    return t;
}

// Runs op (a syscall returning < 0 on failure) as durability operation number n: first the
// crash point, then the operation, then (if it succeeded) its trace line.  The lock is held
// across the three so that the numbering is the order in which operations took effect.
template <class Op>
auto traced(const char *name, const std::string &a, const std::string &b, Op op) -> decltype(op()) {
    FsTrace &t = trace();
    if (!t.on) return op();
    std::lock_guard<std::mutex> l(t.m);
    uint64_t n = t.n + 1;
    if (n == t.crash_at) {
        if (t.crash_signal == SIGKILL) ::kill(::getpid(), SIGKILL);
        else ::raise(t.crash_signal);  // this thread, before the operation: the tool's handler runs here
    }
    auto r = op();
    if (r < 0) return r;
    t.n = n;
    if (t.fd >= 0) {
        std::string line = std::to_string(n) + " " + name + " " + a + (b.empty() ? "" : " " + b) + "\n";
        ssize_t w = ::write(t.fd, line.data(), line.size());
        (void)w;
    }
    return r;
}

int fsync_dir_quiet(const std::string &dir) {
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -1;
    int r = traced("fsyncdir", dir, "", [&] { return ::fsync(dfd); });
    int e = errno;
    ::close(dfd);
    errno = e;
    return r;
}

}  // namespace

OutputFile::OutputFile(const std::string &final_path) : final_(final_path) {
    tmp_ = dir_of(final_path) + "/." + base_of(final_path) + ".tmp." + std::to_string(::getpid());
    // RDWR: 18.5 reads headers back
    fd_ = traced("create", tmp_, "", [&] { return ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); });
    if (fd_ < 0) fail_errno("cannot create " + tmp_);
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) traced("unlink", tmp_, "", [&] { return ::unlink(tmp_.c_str()); });
}

void OutputFile::pwrite(const void *data, size_t len, uint64_t offset) {
    written_ += len;
    auto *p = static_cast<const char *>(data);
    while (len > 0) {
        ssize_t n = traced("write", tmp_, std::to_string(offset) + "+" + std::to_string(len),
                           [&] { return ::pwrite(fd_, p, len, off_t(offset)); });
        if (n < 0) {
            if (errno == EINTR) continue;
            fail_errno("cannot write " + tmp_);
        }
        p += n;
        len -= size_t(n);
        offset += uint64_t(n);
    }
}

void OutputFile::pread(void *data, size_t len, uint64_t offset) const {
    auto *p = static_cast<char *>(data);
    while (len > 0) {
        ssize_t n = ::pread(fd_, p, len, off_t(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_errno("cannot read back " + tmp_);
        if (n == 0) throw_error(STK_E_IO, "cannot read back %s: it ends at %llu", tmp_.c_str(), (unsigned long long)offset);
        p += n;
        len -= size_t(n);
        offset += uint64_t(n);
    }
}

void OutputFile::write_zeros(uint64_t len) {
    uint64_t end;
    if (!add_ok(size_, len, &end) || end > uint64_t(INT64_MAX))
        throw_error(STK_E_IO, "cannot extend %s by %llu bytes", tmp_.c_str(), (unsigned long long)len);
    // Allocated, not a hole: a hole gets its pages only when first touched, and on a full file
    // system that is a reader's SIGBUS (tmpfs allocates on a read fault) long after the writer
    // succeeded.  fallocate reserves the blocks now (ENOSPC here, named) and they read as zeros;
    // a file system without it gets the zeros written.
    if (len && traced("write", tmp_, std::to_string(size_) + "+" + std::to_string(len), [&] {
                   if (::fallocate(fd_, 0, off_t(size_), off_t(len)) == 0) return 0;
                   if (errno != EOPNOTSUPP && errno != ENOSYS) return -1;
                   static const char zeros[64 * 1024] = {};
                   for (uint64_t off = size_; off < end;) {
                       ssize_t n = ::pwrite(fd_, zeros, size_t(std::min<uint64_t>(sizeof zeros, end - off)), off_t(off));
                       if (n < 0 && errno == EINTR) continue;
                       if (n <= 0) return -1;
                       off += uint64_t(n);
                   }
                   return 0;
               }) != 0)
        fail_errno("cannot extend " + tmp_ + " by " + std::to_string(len) + " zero bytes");
    written_ += len;
    size_ = end;
}

void OutputFile::write(const void *data, size_t len) {
    pwrite(data, len, size_);
    size_ += len;
}

namespace {

// An open temporary given up: closed and unlinked.
void discard_file(int fd, const std::string &tmp) {
    ::close(fd);
    traced("unlink", tmp, "", [&] { return ::unlink(tmp.c_str()); });
}

// OutputFile::commit's steps on an open temporary: fsync, close, link to the final name (never
// replacing one), unlink the temporary, fsync the directory.
void commit_file(int fd, const std::string &tmp, const std::string &final_path) {
    if (traced("fsync", tmp, "", [&] { return ::fsync(fd); }) != 0) {
        const int e = errno;
        discard_file(fd, tmp);
        errno = e;
        fail_errno("cannot fsync " + tmp);
    }
    ::close(fd);
    // link() fails with EEXIST instead of replacing: a published file is never rewritten.
    if (traced("link", tmp, final_path, [&] { return ::link(tmp.c_str(), final_path.c_str()); }) != 0) {
        const int e = errno;
        traced("unlink", tmp, "", [&] { return ::unlink(tmp.c_str()); });
        if (e == EEXIST) throw_error(STK_E_OUTPUT_EXISTS, "%s already exists (outputs are write-once)", final_path.c_str());
        errno = e;
        fail_errno("cannot publish " + final_path);
    }
    traced("unlink", tmp, "", [&] { return ::unlink(tmp.c_str()); });
    fsync_dir_quiet(dir_of(final_path));
}

}  // namespace

void OutputFile::commit() {
    const int fd = fd_;
    fd_ = -1;
    committed_ = true;  // commit_file closes the descriptor and unlinks the temporary, whatever happens
    commit_file(fd, tmp_, final_);
}

void OutputFile::commit_later(CommitQueue &queue) {
    const int fd = fd_;
    fd_ = -1;
    committed_ = true;
    queue.push(fd, tmp_, final_);
}

struct CommitQueue::State {
    struct Item {
        int fd;
        std::string tmp, final_path;
    };
    std::mutex m;
    std::condition_variable work, idle;
    std::deque<Item> items;
    std::vector<std::string> finals;
    std::exception_ptr error;
    bool busy = false, stop = false;
    std::thread thread;

    void loop() {
        std::unique_lock<std::mutex> g(m);
        for (;;) {
            work.wait(g, [&] { return stop || !items.empty(); });
            if (items.empty()) return;  // stopped and nothing left
            Item it = std::move(items.front());
            items.pop_front();
            busy = true;
            const bool failed = error != nullptr;
            g.unlock();
            std::exception_ptr e;
            if (failed) {  // the queue stopped at an earlier failure: discard
                discard_file(it.fd, it.tmp);
            } else {
                try {
                    commit_file(it.fd, it.tmp, it.final_path);
                } catch (...) {
                    e = std::current_exception();
                }
            }
            g.lock();
            if (e && !error) error = e;
            busy = false;
            if (items.empty()) idle.notify_all();
        }
    }
};

CommitQueue::CommitQueue() : st_(nullptr) {}  // the state comes with the first file handed over

CommitQueue::~CommitQueue() {
    close();
    delete st_;
}

void CommitQueue::close() noexcept {
    if (!st_) return;
    {
        std::lock_guard<std::mutex> g(st_->m);
        st_->stop = true;
    }
    st_->work.notify_all();
    if (st_->thread.joinable()) st_->thread.join();
}

void CommitQueue::push(int fd, const std::string &tmp, const std::string &final_path) {
    if (!st_) {
        try {
            st_ = new State;
        } catch (...) {
            discard_file(fd, tmp);
            throw;
        }
    }
    State &s = *st_;
    std::unique_lock<std::mutex> g(s.m);
    s.finals.push_back(final_path);
    if (s.error || s.stop) {  // stopped: this file is discarded like the rest
        g.unlock();
        discard_file(fd, tmp);
        return;
    }
    if (!s.thread.joinable()) {
        try {
            s.thread = std::thread([&s] { s.loop(); });
        } catch (...) {  // no thread: commit here, as OutputFile::commit would (nothing queued yet)
            g.unlock();
            commit_file(fd, tmp, final_path);
            return;
        }
    }
    s.items.push_back({fd, tmp, final_path});
    g.unlock();
    s.work.notify_one();
}

void CommitQueue::drain() {
    if (!st_) return;
    State &s = *st_;
    std::unique_lock<std::mutex> g(s.m);
    s.idle.wait(g, [&] { return s.items.empty() && !s.busy; });
    if (s.error) std::rethrow_exception(s.error);
}

std::vector<std::string> CommitQueue::handed_over() const {
    if (!st_) return {};
    std::lock_guard<std::mutex> g(st_->m);
    return st_->finals;
}

void make_dirs(const std::string &path) {
    std::string cur;
    size_t i = 0;
    while (i <= path.size()) {
        size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        cur = path.substr(0, j);
        struct stat st;
        if (!cur.empty() && ::stat(cur.c_str(), &st) != 0 &&
            traced("mkdir", cur, "", [&] { return ::mkdir(cur.c_str(), 0755); }) != 0 && errno != EEXIST)
            fail_errno("cannot create directory " + cur);
        i = j + 1;
    }
}

void write_file_once(const std::string &path, const void *data, size_t len) {
    OutputFile f(path);
    f.write(data, len);
    f.commit();
}

void durable_rename(const std::string &from, const std::string &to) {
    if (traced("rename", from, to, [&] { return ::rename(from.c_str(), to.c_str()); }) != 0)
        fail_errno("cannot rename " + from + " to " + to);
}

void durable_fsync_dir(const std::string &dir) {
    if (fsync_dir_quiet(dir) != 0) fail_errno("cannot fsync directory " + dir);
}

void durable_mkdir(const std::string &dir) {
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return;
    if (traced("mkdir", dir, "", [&] { return ::mkdir(dir.c_str(), 0755); }) != 0 && errno != EEXIST)
        fail_errno("cannot create directory " + dir);
}

void durable_unlink(const std::string &path) {
    if (traced("unlink", path, "", [&] { return ::unlink(path.c_str()); }) != 0 && errno != ENOENT)
        fail_errno("cannot remove " + path);
}

void durable_rmdir(const std::string &dir) {
    if (traced("rmdir", dir, "", [&] { return ::rmdir(dir.c_str()); }) != 0 && errno != ENOENT)
        fail_errno("cannot remove directory " + dir);
}

void durable_remove_tree(const std::string &path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        durable_unlink(path);
        return;
    }
    DIR *d = ::opendir(path.c_str());
    if (!d) fail_errno("cannot open directory " + path);
    std::vector<std::string> names;
    while (struct dirent *e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.push_back(e->d_name);
    ::closedir(d);
    for (const std::string &n : names) durable_remove_tree(path + "/" + n);
    durable_rmdir(path);
}

void durable_replace_file(const std::string &path, const void *data, size_t len) {
    std::string tmp = path + ".tmp";
    int fd = traced("create", tmp, "", [&] { return ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); });
    if (fd < 0) fail_errno("cannot create " + tmp);
    const char *p = static_cast<const char *>(data);
    size_t off = 0;
    while (off < len) {
        ssize_t n = traced("write", tmp, std::to_string(off) + "+" + std::to_string(len - off),
                           [&] { return ::pwrite(fd, p + off, len - off, off_t(off)); });
        if (n < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            ::close(fd);
            errno = e;
            fail_errno("cannot write " + tmp);
        }
        off += size_t(n);
    }
    if (traced("fsync", tmp, "", [&] { return ::fsync(fd); }) != 0) {
        int e = errno;
        ::close(fd);
        errno = e;
        fail_errno("cannot fsync " + tmp);
    }
    ::close(fd);
    durable_rename(tmp, path);
    durable_fsync_dir(dir_of(path));
}

}  // namespace stk
