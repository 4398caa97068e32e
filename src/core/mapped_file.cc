#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"

namespace stk {

MappedFile::MappedFile(const std::string &path, bool follow_symlinks) : path_(path) {
    // O_NONBLOCK: a FIFO (or a device) given as a file is refused below, never waited on in open()
    // for a writer that may not come; a regular file's reads and mapping ignore the flag.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_symlinks ? 0 : O_NOFOLLOW));
    if (fd < 0 && errno == ELOOP && !follow_symlinks)
        throw_error(STK_E_CORRUPT,
                    "%s is a symbolic link: a generation's files are plain files; refused (a link can "
                    "lead out of the root)",
                    path.c_str());
    if (fd < 0) fail_errno("cannot open " + path);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        errno = e;
        fail_errno("cannot stat " + path);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        const char *kind = S_ISFIFO(st.st_mode)  ? "a FIFO (named pipe)"
                           : S_ISDIR(st.st_mode) ? "a directory"
                           : S_ISCHR(st.st_mode) ? "a character device"
                           : S_ISBLK(st.st_mode) ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "not a file";
        throw_error(STK_E_IO, "%s: not a regular file (%s): refused, a file is read whole and mapped", path.c_str(), kind);
    }
    size_ = uint64_t(st.st_size);
    opened_ = true;
    if (size_ > 0) {
        void *p = ::mmap(nullptr, size_t(size_), PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            errno = e;
            fail_errno("cannot map " + path);
        }
        data_ = static_cast<const uint8_t *>(p);
    }
    ::close(fd);
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
    if (data_ && size_) ::munmap(const_cast<uint8_t *>(data_), size_t(size_));
    data_ = nullptr;
    size_ = 0;
    opened_ = false;
}

MappedFile::MappedFile(MappedFile &&o) noexcept : data_(o.data_), size_(o.size_), path_(std::move(o.path_)), opened_(o.opened_) {
    o.data_ = nullptr;
    o.size_ = 0;
    o.opened_ = false;
}

MappedFile &MappedFile::operator=(MappedFile &&o) noexcept {
    if (this != &o) {
        release();
        data_ = o.data_;
        size_ = o.size_;
        path_ = std::move(o.path_);
        opened_ = o.opened_;
        o.data_ = nullptr;
        o.size_ = 0;
        o.opened_ = false;
    }
    return *this;
}

static void advise(const uint8_t *base, uint64_t size, uint64_t off, uint64_t len, int advice) {
    if (!base || off >= size) return;
    if (len > size - off) len = size - off;
    long page = ::sysconf(_SC_PAGESIZE);
    uint64_t start = off & ~uint64_t(page - 1);
    ::madvise(const_cast<uint8_t *>(base) + start, size_t(off + len - start), advice);
}

void MappedFile::will_need(uint64_t off, uint64_t len) const { advise(data_, size_, off, len, MADV_WILLNEED); }
void MappedFile::dont_need(uint64_t off, uint64_t len) const { advise(data_, size_, off, len, MADV_DONTNEED); }

bool file_exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_small_file(const std::string &path, uint64_t max_bytes) {
    MappedFile f(path);
    if (f.size() > max_bytes)
        throw_error(STK_E_SIZE_MISMATCH, "%s: %llu bytes, more than the %llu this file may have", path.c_str(),
                    (unsigned long long)f.size(), (unsigned long long)max_bytes);
    return std::string(reinterpret_cast<const char *>(f.data()), size_t(f.size()));
}

}  // namespace stk
