#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"

namespace stk {

static std::string dir_of(const std::string &path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : (slash == 0 ? "/" : path.substr(0, slash));
}

static std::string base_of(const std::string &path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

OutputFile::OutputFile(const std::string &final_path) : final_(final_path) {
    tmp_ = dir_of(final_path) + "/." + base_of(final_path) + ".tmp." + std::to_string(::getpid());
    fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);  // RDWR: 18.5 reads headers back
    if (fd_ < 0) fail_errno("cannot create " + tmp_);
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
}

void OutputFile::pwrite(const void *data, size_t len, uint64_t offset) {
    written_ += len;
    auto *p = static_cast<const char *>(data);
    while (len > 0) {
        ssize_t n = ::pwrite(fd_, p, len, off_t(offset));
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

void OutputFile::write(const void *data, size_t len) {
    pwrite(data, len, size_);
    size_ += len;
}

void OutputFile::commit() {
    if (::fsync(fd_) != 0) fail_errno("cannot fsync " + tmp_);
    ::close(fd_);
    fd_ = -1;
    // link() fails with EEXIST instead of replacing: a published file is never rewritten.
    if (::link(tmp_.c_str(), final_.c_str()) != 0) {
        if (errno == EEXIST) throw_error(STK_E_OUTPUT_EXISTS, "%s already exists (outputs are write-once)", final_.c_str());
        fail_errno("cannot publish " + final_);
    }
    ::unlink(tmp_.c_str());
    committed_ = true;
    int dfd = ::open(dir_of(final_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void make_dirs(const std::string &path) {
    std::string cur;
    size_t i = 0;
    while (i <= path.size()) {
        size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        cur = path.substr(0, j);
        if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) fail_errno("cannot create directory " + cur);
        i = j + 1;
    }
}

void write_file_once(const std::string &path, const void *data, size_t len) {
    OutputFile f(path);
    f.write(data, len);
    f.commit();
}

}  // namespace stk
