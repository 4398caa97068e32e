// Round trip of the manifest through its writers and reader (src/format/manifest.cc), starting
// from structured values rather than bytes: the input patches bytes of ManifestFields (starting
// from all-zero = every feature disabled), and gives P_gen ids, array entries, stage states and
// records.  Whatever encode_manifest accepts, decode_manifest must accept, encoding the decoded
// manifest must give the same bytes, and write_manifest (the streamed file writer) must write
// exactly those bytes (write -> read -> write).  fuzz/manifest.cc fuzzes the reader from bytes.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/array.h"
#include "format/manifest.h"
#include "roundtrip_util.h"

static const char kNameChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/ ";

static stk::ManifestInput input_of(const stk::Manifest &m) {
    stk::ManifestInput in;
    in.fields = &m.fields;
    in.p_gen = m.p_gen.data();
    in.n_pgen = uint32_t(m.p_gen.size());
    in.arrays = m.arrays.data();
    in.n_arrays = uint32_t(m.arrays.size());
    for (uint32_t i = 0; i < stk::kManifestStages; i++) in.stages[i] = m.stages[i];
    in.records = m.records.data();
    in.n_records = uint32_t(m.records.size());
    std::memcpy(in.prev_hash, m.prev_hash, 32);
    if (m.has_runtime) {  // the faithful profile's runtime block
        in.runtime = &m.runtime;
        in.runtime_layers = m.runtime_layers.data();
    }
    return in;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Cursor c(data, size);
    stk::ManifestFields fields;
    uint8_t *fb = reinterpret_cast<uint8_t *>(&fields);
    for (uint32_t i = 0, n = c.u8() % 32; i < n; i++) {  // byte patches: (offset, value)
        size_t at = size_t(c.bytes(2)) % sizeof fields;
        fb[at] = c.u8();
    }
    std::vector<uint32_t> p_gen(c.u8() % 8);
    for (uint32_t &id : p_gen) id = uint32_t(c.bytes(4)) % (fields.tokenizer.vocab_size + 1);
    std::vector<stk::ManifestArray> arrays(c.u8() % 4);
    for (stk::ManifestArray &a : arrays) {
        size_t len = c.u8() % 66;
        for (size_t i = 0; i < len && i < sizeof a.name; i++) a.name[i] = kNameChars[c.u8() % (sizeof kNameChars - 1)];
        a.stage = uint16_t(c.u8() % 10);
        a.dtype = uint16_t(c.u8() % 11);
        a.rank = uint16_t(c.u8() % 7);
        a.flags = c.u8();
        a.crc32c = uint32_t(c.bytes(4));
        uint64_t n = 1;
        for (uint64_t &d : a.dims) {
            uint8_t k = c.u8();
            d = k & 0x80 ? c.bytes(8) : k;
        }
        for (uint32_t i = 0; i < a.rank && i < 5; i++) n *= a.dims[i];
        a.byte_len = c.u8() & 1 ? c.bytes(8) : n * stk::dtype_size(a.dtype);
        a.sha256_low64 = c.bytes(8);
    }
    stk::ManifestInput in;
    for (stk::ManifestStage &s : in.stages) {
        s.state = uint16_t(c.u8() % 6);
        s.crc32c = uint32_t(c.bytes(4));
        s.sha256_low64 = c.bytes(8);
    }
    std::vector<stk::ManifestRecord> records(c.u8() % 4);
    for (stk::ManifestRecord &r : records) {
        r.stage = uint16_t(c.u8() % 12);
        r.kind = uint16_t(c.u8() % 6);
        r.feature = c.u8() % 10;
        r.status = c.u8() % 101;
        uint64_t v = c.bytes(8), b = c.bytes(8);
        std::memcpy(&r.value, &v, 8);
        std::memcpy(&r.bound, &b, 8);
        size_t len = c.u8() % 97;
        for (size_t i = 0; i < len && i < sizeof r.text; i++) r.text[i] = char(0x1f + c.u8() % 0x61);
    }
    for (uint8_t &h : in.prev_hash) h = c.u8();
    in.fields = &fields;
    in.p_gen = p_gen.data();
    in.n_pgen = uint32_t(p_gen.size());
    in.arrays = arrays.data();
    in.n_arrays = uint32_t(arrays.size());
    in.records = records.data();
    in.n_records = uint32_t(records.size());

    std::vector<uint8_t> bytes;
    try {
        bytes = stk::encode_manifest(in);
    } catch (const stk::Error &e) {
        if (e.status() != STK_E_INVALID_ARGUMENT) __builtin_trap();  // writers refuse with this status only
        return 0;
    }
    // Accepted by the writer: the reader must take it (an stk::Error escapes and aborts).
    stk::Manifest m = stk::decode_manifest(bytes.data(), bytes.size(), "roundtrip.bin");
    stk::ManifestInput again = input_of(m);
    if (stk::encode_manifest(again) != bytes) __builtin_trap();
    std::string path = fuzz::scratch_dir() + "/sera_manifest.bin";
    uint8_t curr[32];
    stk::write_manifest(path, again, curr);
    std::vector<uint8_t> file = fuzz::slurp(path);
    unlink(path.c_str());
    if (file != bytes || std::memcmp(curr, bytes.data() + bytes.size() - 32, 32) != 0) __builtin_trap();
    return 0;
}
