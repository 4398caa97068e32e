// A read-only memory map of a whole file, named for error messages.  Empty files map to an empty
// span.  Move-only; unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace stk {

class MappedFile {
public:
    MappedFile() = default;
    // Throws STK_E_NOT_FOUND / STK_E_IO naming the path.  follow_symlinks false: a symbolic link
    // as the last component is refused (STK_E_CORRUPT): a generation's files (CURRENT, the
    // manifest, arrays) are plain files that stk wrote, and a link could lead out of the root.
    explicit MappedFile(const std::string &path, bool follow_symlinks = true);
    ~MappedFile();
    MappedFile(MappedFile &&other) noexcept;
    MappedFile &operator=(MappedFile &&other) noexcept;
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    const uint8_t *data() const { return data_; }
    uint64_t size() const { return size_; }
    const std::string &path() const { return path_; }
    bool is_open() const { return data_ != nullptr || opened_; }

    // Hint the kernel that [offset, offset+len) will be read soon / is no longer needed.
    void will_need(uint64_t offset, uint64_t len) const;
    void dont_need(uint64_t offset, uint64_t len) const;

private:
    void release() noexcept;
    const uint8_t *data_ = nullptr;
    uint64_t size_ = 0;
    std::string path_;
    bool opened_ = false;
};

// True if `path` exists and is a regular file.
bool file_exists(const std::string &path);

// Whole small file into a string (configs, JSON): refuses files above max_bytes.
std::string read_small_file(const std::string &path, uint64_t max_bytes);

}  // namespace stk
