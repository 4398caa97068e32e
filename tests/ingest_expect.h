// Shared by the checkpoint-reader tests: compare a Checkpoint with tests/data/ingest/expected.json
// (written by scripts/make_ingest_fixtures.py from independent Python readers and torch.load):
// every tensor's name, dtype, shape and every value as exact f32 bits (NaN: any NaN).
#pragma once

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <map>

#include "ingest/checkpoint.h"
#include "test_util.h"

namespace stk::test {

inline simdjson::dom::element expected_json() {
    static simdjson::dom::parser parser;
    static simdjson::dom::element doc;
    static bool loaded = false;
    if (!loaded) {
        auto err = parser.load(test_data("ingest/expected.json")).get(doc);
        if (err) {
            print_error("cannot read expected.json: %s\n", simdjson::error_message(err));
            fail();
        }
        loaded = true;
    }
    return doc;
}

inline uint32_t f32_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// Asserts that `ck` holds exactly the tensors of expected.json[key], with their values.
// Returns the number of values compared.
inline uint64_t expect_checkpoint_matches(const Checkpoint &ck, const char *key) {
    simdjson::dom::object want;
    if (expected_json()[key].get_object().get(want)) {
        print_error("expected.json has no entry '%s'\n", key);
        fail();
    }
    std::map<std::string, simdjson::dom::element> by_name;
    for (auto f : want) by_name[std::string(f.key)] = f.value;
    assert_int_equal(ck.tensors().size(), by_name.size());
    uint64_t compared = 0;
    std::vector<uint8_t> scratch;
    for (const TensorRef &t : ck.tensors()) {
        auto it = by_name.find(t.name);
        if (it == by_name.end()) {
            print_error("%s: unexpected tensor '%s'\n", key, t.name.c_str());
            fail();
        }
        std::string_view dt;
        if (it->second["dtype"].get_string().get(dt)) fail();
        if (dt != src_dtype_name(t.dtype)) {
            print_error("%s: tensor '%s' dtype %s, expected %s\n", key, t.name.c_str(), src_dtype_name(t.dtype),
                        std::string(dt).c_str());
            fail();
        }
        std::vector<uint64_t> shape;
        simdjson::dom::array shape_json, values;  // named: value() of a temporary result dangles
        if (it->second["shape"].get_array().get(shape_json) || it->second["values"].get_array().get(values)) fail();
        for (auto d : shape_json) shape.push_back(d.get_uint64().value());
        assert_true(shape == t.shape);
        assert_int_equal(values.size(), t.n_elements);
        std::vector<float> got(t.n_elements);
        const uint8_t *bytes = ck.tensor_bytes(t, scratch);
        convert_to_f32(t, bytes, 0, t.n_elements, got.data());
        size_t i = 0;
        for (auto v : values) {
            if (v.is_null()) {
                if (!std::isnan(got[i])) {
                    print_error("%s: '%s'[%zu] = %g, expected NaN\n", key, t.name.c_str(), i, double(got[i]));
                    fail();
                }
            } else {
                uint32_t want_bits = uint32_t(v.get_uint64().value());
                if (f32_bits(got[i]) != want_bits) {
                    print_error("%s: '%s'[%zu] = %.9g (0x%08x), expected 0x%08x\n", key, t.name.c_str(), i, double(got[i]),
                                f32_bits(got[i]), want_bits);
                    fail();
                }
            }
            i++;
            compared++;
        }
        // Converting any sub-range gives the same values (the strided walk restarts mid-row).
        if (t.n_elements >= 3) {
            std::vector<float> part(t.n_elements - 2);
            convert_to_f32(t, bytes, 1, t.n_elements - 2, part.data());
            for (size_t j = 0; j < part.size(); j++)
                if (f32_bits(part[j]) != f32_bits(got[j + 1]) && !(std::isnan(part[j]) && std::isnan(got[j + 1]))) {
                    print_error("%s: '%s' sub-range [1, %zu) differs at %zu\n", key, t.name.c_str(), part.size() + 1, j + 1);
                    fail();
                }
        }
    }
    return compared;
}

}  // namespace stk::test
