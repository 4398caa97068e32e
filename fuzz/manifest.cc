// Fuzz the manifest reader (src/format/manifest.cc).  Each input is decoded twice: as given (the
// curr_hash check guards everything after the counts), and with curr_hash recomputed, so the
// fuzzer reaches every field, table and record check.  An accepted manifest must re-encode to
// exactly the same bytes (the format is canonical: one byte string per manifest).
//
// Seed corpus fuzz/corpus/manifest/: manifests written by the real writer - the docs/format.md
// test vector (P_gen ids), generations from tests/test_check.cc (arrays, stage digests,
// disabled-feature records) and tests/test_api.cc (no arrays), and `stk convert --partial`
// outputs (convert_*.bin: tests/data/models/gpt2 with the shared GPT-2 vocab.json + merges.txt and
// --allow-uncertified-tokenizer, 9 tokenizer arrays; gpt2 alone; llama with llama2 tokenizer.json);
// faithful-*.bin: `stk convert --profile faithful` of tests/data/models/llama (--ffn bf16 --policy
// h2o --recent 100 --window 252), of tests/fixtures/families/gemma3 (sliding layers, two rope
// bases; the default Q8_0 FFN) and of tests/data/models/mixtral with --ffn int8 and with the
// default (Q8_0, its 48-wide experts_w2 kept bf16), and of tests/fixtures/families/qwen3_moe with
// --ffn q4_0 --policy tova (block-scaled arrays, dtype 10): the runtime block (its policy and
// recent count included) and its per-layer entries, round-tripped with the rest.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checksum.h"
#include "core/error.h"
#include "format/manifest.h"

static void round_trip(const uint8_t *data, size_t size) {
    stk::Manifest m = stk::decode_manifest(data, size, "fuzz.bin");
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
    std::vector<uint8_t> again = stk::encode_manifest(in);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        round_trip(data, size);
    } catch (const stk::Error &) {
    }
    if (size >= 32) {
        std::vector<uint8_t> b(data, data + size);
        stk::Sha256Digest h = stk::sha256(b.data(), size - 32);
        std::memcpy(&b[size - 32], h.bytes, 32);
        try {
            round_trip(b.data(), b.size());
        } catch (const stk::Error &) {
        }
    }
    return 0;
}
