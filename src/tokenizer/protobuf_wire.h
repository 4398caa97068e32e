// A bounded reader of the protobuf wire format (varint, 64-bit, length-delimited, 32-bit fields),
// enough to walk SentencePiece's ModelProto.  Every read is checked against the end of the
// message; errors name the file and the absolute byte offset.  Groups (wire types 3, 4) are
// refused: proto3/proto2 files written by sentencepiece never contain them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"

namespace stk::pb {

struct Field {
    uint32_t number = 0;
    uint8_t wire_type = 0;          // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
    uint64_t varint = 0;            // wire types 0, 1, 5 (fixed values zero-extended)
    const uint8_t *data = nullptr;  // wire type 2
    uint64_t size = 0;              // wire type 2
    uint64_t offset = 0;            // absolute offset of the field's tag in the file
};

class Reader {
public:
    // [data, data+size) is one message starting at absolute file offset `base`.
    Reader(const uint8_t *data, uint64_t size, uint64_t base, const std::string &file)
        : p_(data), begin_(data), end_(data + size), base_(base), file_(file) {}

    // Reads the next field; false at the end of the message.
    bool next(Field &f) {
        if (p_ == end_) return false;
        f.offset = offset();
        uint64_t tag = varint("field tag");
        f.number = uint32_t(tag >> 3);
        f.wire_type = uint8_t(tag & 7);
        if ((tag >> 3) == 0 || (tag >> 3) > 0x1FFFFFFFu)
            throw_error(STK_E_CORRUPT, "%s: byte offset %llu: invalid protobuf field number %llu", file_.c_str(),
                        (unsigned long long)f.offset, (unsigned long long)(tag >> 3));
        switch (f.wire_type) {
            case 0: f.varint = varint("varint field"); break;
            case 1: f.varint = fixed(8); break;
            case 5: f.varint = fixed(4); break;
            case 2: {
                uint64_t len = varint("length");
                if (len > uint64_t(end_ - p_))
                    throw_error(STK_E_TRUNCATED,
                                "%s: byte offset %llu: field %u claims %llu bytes, only %llu left in its message", file_.c_str(),
                                (unsigned long long)f.offset, f.number, (unsigned long long)len, (unsigned long long)(end_ - p_));
                f.data = p_;
                f.size = len;
                p_ += len;
                break;
            }
            default:
                throw_error(STK_E_CORRUPT, "%s: byte offset %llu: unsupported protobuf wire type %u (field %u)", file_.c_str(),
                            (unsigned long long)f.offset, f.wire_type, f.number);
        }
        return true;
    }

    uint64_t offset() const { return base_ + uint64_t(p_ - begin_); }
    // Absolute offset of a length-delimited field's payload.
    uint64_t payload_offset(const Field &f) const { return base_ + uint64_t(f.data - begin_); }

    // Typed views of a field, refusing the wrong wire type.
    void expect(const Field &f, uint8_t wire_type, const char *what) const {
        if (f.wire_type != wire_type)
            throw_error(STK_E_CORRUPT, "%s: byte offset %llu: %s (field %u) has wire type %u, expected %u", file_.c_str(),
                        (unsigned long long)f.offset, what, f.number, f.wire_type, wire_type);
    }
    float as_float(const Field &f, const char *what) const {
        expect(f, 5, what);
        uint32_t u = uint32_t(f.varint);
        float v;
        std::memcpy(&v, &u, 4);
        return v;
    }
    int32_t as_int32(const Field &f, const char *what) const {
        expect(f, 0, what);
        return int32_t(uint32_t(f.varint));  // proto int32: low 32 bits (negatives are 10-byte varints)
    }
    bool as_bool(const Field &f, const char *what) const {
        expect(f, 0, what);
        return f.varint != 0;
    }
    std::string_view as_bytes(const Field &f, const char *what) const {
        expect(f, 2, what);
        return std::string_view(reinterpret_cast<const char *>(f.data), size_t(f.size));
    }

private:
    uint64_t varint(const char *what) {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p_ == end_)
                throw_error(STK_E_TRUNCATED, "%s: byte offset %llu: message ends inside a %s", file_.c_str(),
                            (unsigned long long)offset(), what);
            uint8_t b = *p_++;
            if (shift == 63 && b > 1)
                throw_error(STK_E_CORRUPT, "%s: byte offset %llu: %s overflows 64 bits", file_.c_str(),
                            (unsigned long long)(offset() - 1), what);
            v |= uint64_t(b & 0x7F) << shift;
            if (!(b & 0x80)) return v;
        }
        throw_error(STK_E_CORRUPT, "%s: byte offset %llu: %s longer than 10 bytes", file_.c_str(), (unsigned long long)offset(),
                    what);
    }
    uint64_t fixed(int n) {
        if (uint64_t(end_ - p_) < uint64_t(n))
            throw_error(STK_E_TRUNCATED, "%s: byte offset %llu: message ends inside a %d-byte field", file_.c_str(),
                        (unsigned long long)offset(), n);
        uint64_t v = 0;
        std::memcpy(&v, p_, size_t(n));
        p_ += n;
        return v;
    }

    const uint8_t *p_, *begin_, *end_;
    uint64_t base_;
    const std::string &file_;
};

}  // namespace stk::pb
