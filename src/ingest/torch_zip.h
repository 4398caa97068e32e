// PyTorch's zip checkpoint format (torch >= 1.6): a zip archive "<prefix>/data.pkl" (the pickled
// state dict, storages as persistent ids), "<prefix>/data/<key>" (one entry per storage, raw
// little-endian elements), "<prefix>/version", "<prefix>/byteorder".  Our own zip reader
// (end of central directory, zip64, local headers cross-checked) and the allowlist unpickler
// (src/ingest/pickle.h) turn it into tensors; nothing in the pickle is executed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "ingest/source.h"

namespace stk {

struct ZipEntry {
    std::string name;
    uint16_t method = 0;  // 0 STORED, 8 DEFLATED
    uint32_t crc32 = 0;
    uint64_t compressed_size = 0;
    uint64_t size = 0;  // uncompressed
    uint64_t local_header_offset = 0;
    uint64_t data_offset = 0;  // first byte of the (compressed) data in the file
};

// Parse and validate the central directory of a zip held in [data, data+size): end of central
// directory (zip64 where needed), every entry's local header cross-checked (name, method,
// sizes), names with "..", absolute paths or backslashes refused, entry data inside the file and
// not overlapping.  `path` names the file in errors.  Entries in central-directory order.
std::vector<ZipEntry> parse_zip_directory(const uint8_t *data, uint64_t size, const std::string &path);

// The bytes of one entry: STORED entries point into the mapping; DEFLATED entries are inflated
// with libdeflate into `scratch` (exactly entry.size bytes, CRC-checked).
const uint8_t *zip_entry_bytes(const uint8_t *data, const ZipEntry &e, std::vector<uint8_t> &scratch, const std::string &path);

// A torch zip checkpoint as a Source (takes over the mapping).
std::unique_ptr<Source> open_torch_zip(MappedFile file);

// PyTorch's legacy format (torch < 1.6 or _use_new_zipfile_serialization=False): pickles then raw
// storages, mapped in place (see pickle.h, LegacyLayout).
std::unique_ptr<Source> open_torch_legacy(MappedFile file);

// The same over caller-owned bytes that outlive the Source (fuzzing, tests); file() is empty.
std::unique_ptr<Source> open_torch_zip_memory(const uint8_t *data, uint64_t size, const std::string &path);

}  // namespace stk
