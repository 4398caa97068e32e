// Write-once output files: bytes go to a hidden temporary file in the destination directory,
// are fsynced, and only then renamed over the final name (and the directory fsynced).  A crash or
// an error leaves at most a ".*.tmp" file, never a truncated file under the final name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace stk {

class OutputFile {
public:
    // Creates "<dir>/.<name>.tmp.<pid>"; throws STK_E_IO naming the path.
    explicit OutputFile(const std::string &final_path);
    ~OutputFile();  // discards (unlinks) the temporary file unless commit() succeeded
    OutputFile(const OutputFile &) = delete;
    OutputFile &operator=(const OutputFile &) = delete;

    void write(const void *data, size_t len);        // sequential append
    void pwrite(const void *data, size_t len, uint64_t offset);  // header patch before commit
    void pread(void *data, size_t len, uint64_t offset) const;   // read back before commit (18.5)
    uint64_t size() const { return size_; }
    // Bytes handed to write() and pwrite() so far (tests: 18.5 writes a payload exactly once).
    uint64_t bytes_written() const { return written_; }
    // fsync, rename to the final name, fsync the directory.  Refuses to replace an existing file
    // (write-once) with STK_E_OUTPUT_EXISTS.
    void commit();
    const std::string &path() const { return final_; }

private:
    std::string final_;
    std::string tmp_;
    int fd_ = -1;
    uint64_t size_ = 0;
    uint64_t written_ = 0;
    bool committed_ = false;
};

// mkdir -p; throws STK_E_IO.
void make_dirs(const std::string &path);
// Whole buffer to a new file, write-once, as OutputFile.
void write_file_once(const std::string &path, const void *data, size_t len);

}  // namespace stk
