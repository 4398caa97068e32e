#include "ingest/pickle.h"

#include <cstring>
#include <map>
#include <unordered_map>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"

namespace stk {

namespace {

enum class Kind : uint8_t { None, Bool, Int, BigInt, Float, Str, Bytes, Tuple, List, Dict, Set, Global, Storage, Tensor };

const char *kind_name(Kind k) {
    switch (k) {
        case Kind::None: return "None";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::BigInt: return "int (more than 64 bits)";
        case Kind::Float: return "float";
        case Kind::Str: return "str";
        case Kind::Bytes: return "bytes";
        case Kind::Tuple: return "tuple";
        case Kind::List: return "list";
        case Kind::Dict: return "dict";
        case Kind::Set: return "set";
        case Kind::Global: return "global";
        case Kind::Storage: return "storage";
        case Kind::Tensor: return "tensor";
    }
    return "?";
}

// The globals we interpret.  Everything else is refused at the GLOBAL opcode.
enum class Fn : uint8_t {
    NotCallable,
    OrderedDict,
    RebuildTensor,
    RebuildTensorV2,
    RebuildParameter,
    RebuildParameterWithState,
    Parameter,
    Size,
    RebuildFromTypeV2,
    CodecsEncode,
    Unsupported,  // real torch rebuild functions for tensors we do not read (sparse, quantized...)
};

struct GlobalDef {
    const char *name;
    Fn fn;
};

constexpr GlobalDef kAllowed[] = {
    {"collections.OrderedDict", Fn::OrderedDict},
    {"torch._utils._rebuild_tensor", Fn::RebuildTensor},
    {"torch._utils._rebuild_tensor_v2", Fn::RebuildTensorV2},
    {"torch._utils._rebuild_parameter", Fn::RebuildParameter},
    {"torch._utils._rebuild_parameter_with_state", Fn::RebuildParameterWithState},
    {"torch.nn.parameter.Parameter", Fn::Parameter},
    {"torch.Size", Fn::Size},
    {"torch._tensor._rebuild_from_type_v2", Fn::RebuildFromTypeV2},
    {"torch.Tensor", Fn::NotCallable},
    {"_codecs.encode", Fn::CodecsEncode},
    {"torch._utils._rebuild_sparse_tensor", Fn::Unsupported},
    {"torch._utils._rebuild_sparse_csr_tensor", Fn::Unsupported},
    {"torch._utils._rebuild_qtensor", Fn::Unsupported},
    {"torch._utils._rebuild_meta_tensor_no_storage", Fn::Unsupported},
    {"torch._utils._rebuild_nested_tensor", Fn::Unsupported},
    {"torch._utils._rebuild_wrapper_subclass", Fn::Unsupported},
    {"torch._utils._rebuild_device_tensor_from_numpy", Fn::Unsupported},
    {"torch.serialization._get_layout", Fn::Unsupported},
};

struct StorageDef {
    const char *name;
    SrcDType dtype;
};
constexpr StorageDef kStorages[] = {
    {"DoubleStorage", SrcDType::F64},          {"FloatStorage", SrcDType::F32},  {"HalfStorage", SrcDType::F16},
    {"BFloat16Storage", SrcDType::BF16},       {"LongStorage", SrcDType::I64},   {"IntStorage", SrcDType::I32},
    {"ShortStorage", SrcDType::I16},           {"CharStorage", SrcDType::I8},    {"ByteStorage", SrcDType::U8},
    {"BoolStorage", SrcDType::BOOL},           {"UntypedStorage", SrcDType::U8}, {"Float8_e4m3fnStorage", SrcDType::F8_E4M3},
    {"Float8_e5m2Storage", SrcDType::F8_E5M2}, {"UInt16Storage", SrcDType::U16}, {"UInt32Storage", SrcDType::U32},
    {"UInt64Storage", SrcDType::U64},
};

struct Obj {
    Kind kind = Kind::None;
    Fn fn = Fn::NotCallable;  // Global
    int64_t i = 0;            // Bool, Int; Storage/Tensor: index into the result
    double f = 0;
    std::string s;                // Str, Bytes, Global name
    std::vector<uint32_t> items;  // Tuple, List, Set; Dict: key, value, key, value...
};

class Unpickler {
public:
    Unpickler(const uint8_t *d, size_t n, const std::string &where) : d_(d), n_(n), where_(where) {}

    PickleResult run() { return finish(execute()); }

    // The legacy (pre-zip) file: five pickles back to back, then the storages.
    LegacyLayout run_legacy() {
        legacy_ = true;
        uint32_t magic = execute();
        if (get(magic).kind != Kind::BigInt) bad(STK_E_CORRUPT, "legacy file without its magic number");
        next_pickle();
        uint32_t version = execute();
        if (get(version).kind != Kind::Int || get(version).i != 1001)
            bad(STK_E_UNSUPPORTED, "legacy file with a protocol version other than 1001");
        next_pickle();
        uint32_t info = execute();
        bool little = false;
        if (get(info).kind == Kind::Dict) {
            const auto &it = get(info).items;
            for (size_t i = 0; i + 1 < it.size(); i += 2)
                if (get(it[i]).kind == Kind::Str && get(it[i]).s == "little_endian")
                    little = get(it[i + 1]).kind == Kind::Bool && get(it[i + 1]).i == 1;
        }
        if (!little) bad(STK_E_UNSUPPORTED, "legacy file not written little-endian");
        next_pickle();
        LegacyLayout out;
        out.result = finish(execute());
        next_pickle();
        uint32_t keys = execute();
        if (get(keys).kind != Kind::List) bad(STK_E_CORRUPT, "legacy storage key list is not a list");
        for (uint32_t k : get(keys).items) {
            if (get(k).kind != Kind::Str) bad(STK_E_CORRUPT, "legacy storage key is not a string");
            out.storage_order.push_back(get(k).s);
        }
        out.data_start = pos_;
        return out;
    }

private:
    bool legacy_ = false;

    // A fresh machine for the next pickle of a legacy file (objects, stack, memo, all reset).  The
    // storage and tensor tables are reset too: they belong to the one pickle that built them (the
    // state dict's were just moved out by finish(); a key naming one of them again in a later
    // pickle must not find an index into the moved-from table).
    void next_pickle() {
        objs_.clear();
        stack_.clear();
        marks_.clear();
        memo_.clear();
        storage_by_key_.clear();
        out_ = PickleResult();
    }

    PickleResult finish(uint32_t root) {
        const Obj &r = objs_[root];
        if (r.kind != Kind::Dict)
            throw_error(STK_E_CORRUPT, "%s: the pickle's root object is a %s, not a dict of tensors", where_.c_str(),
                        kind_name(r.kind));
        std::vector<uint8_t> visited(objs_.size(), 0);
        flatten(root, std::string(), 0, visited);
        return std::move(out_);
    }

    const uint8_t *d_;
    size_t n_;
    std::string where_;
    size_t pos_ = 0;
    size_t op_ = 0;  // offset of the opcode being executed
    std::vector<Obj> objs_;
    std::vector<uint32_t> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint32_t, uint32_t> memo_;
    std::map<std::string, uint32_t> storage_by_key_;
    PickleResult out_;

    [[noreturn]] void bad(stk_status st, const char *what) const {
        throw_error(st, "%s: %s (pickle opcode at offset %zu)", where_.c_str(), what, op_);
    }

    const uint8_t *take(size_t k) {
        if (k > n_ - pos_) bad(STK_E_TRUNCATED, "the pickle ends inside an opcode's argument");
        const uint8_t *p = d_ + pos_;
        pos_ += k;
        return p;
    }

    uint32_t make(Obj o) {
        objs_.push_back(std::move(o));
        return uint32_t(objs_.size() - 1);
    }
    void push(uint32_t id) { stack_.push_back(id); }
    uint32_t push_new(Obj o) {
        uint32_t id = make(std::move(o));
        push(id);
        return id;
    }
    uint32_t pop() {
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() <= floor) bad(STK_E_CORRUPT, "stack underflow");
        uint32_t id = stack_.back();
        stack_.pop_back();
        return id;
    }
    uint32_t top() {
        size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() <= floor) bad(STK_E_CORRUPT, "stack underflow");
        return stack_.back();
    }
    // Items above the last MARK, removing them and the mark.
    std::vector<uint32_t> pop_mark() {
        if (marks_.empty()) bad(STK_E_CORRUPT, "no MARK on the stack");
        size_t m = marks_.back();
        marks_.pop_back();
        std::vector<uint32_t> items(stack_.begin() + long(m), stack_.end());
        stack_.resize(m);
        return items;
    }

    std::string read_line() {
        const void *nl = std::memchr(d_ + pos_, '\n', n_ - pos_);
        if (!nl) bad(STK_E_TRUNCATED, "GLOBAL without a newline-terminated name");
        size_t len = size_t(static_cast<const uint8_t *>(nl) - (d_ + pos_));
        std::string s(reinterpret_cast<const char *>(d_ + pos_), len);
        pos_ += len + 1;
        return s;
    }

    static std::string printable(const std::string &s) { return escape_bytes(s, 200); }

    uint32_t global(const std::string &module, const std::string &name) {
        std::string full = module + "." + name;
        Obj g;
        g.kind = Kind::Global;
        g.s = full;
        for (const GlobalDef &a : kAllowed)
            if (full == a.name) {
                g.fn = a.fn;
                return make(std::move(g));
            }
        if (module == "torch")
            for (const StorageDef &s : kStorages)
                if (name == s.name) {
                    g.fn = Fn::NotCallable;
                    g.i = int64_t(&s - kStorages);
                    g.s = "torch." + name;
                    return make(std::move(g));
                }
        throw_error(STK_E_UNSAFE_PICKLE,
                    "%s: the pickle imports '%s' (GLOBAL at offset %zu), which is not on the allowlist of a weights-only "
                    "load; nothing was executed",
                    where_.c_str(), printable(full).c_str(), op_);
    }

    const Obj &get(uint32_t id) const { return objs_[id]; }

    uint64_t as_dim(uint32_t id, const char *what) {
        const Obj &o = get(id);
        if (o.kind != Kind::Int || o.i < 0) bad(STK_E_CORRUPT, what);
        return uint64_t(o.i);
    }

    std::vector<uint64_t> as_dims(uint32_t id, const char *what) {
        const Obj &o = get(id);
        if (o.kind != Kind::Tuple && o.kind != Kind::List) bad(STK_E_CORRUPT, what);
        std::vector<uint64_t> v;
        for (uint32_t x : o.items) v.push_back(as_dim(x, what));
        return v;
    }

    uint32_t storage_from_pid(uint32_t pid_id) {
        const Obj &pid = get(pid_id);
        // Zip format: ('storage', type, key, location, numel).  Legacy format: one more element,
        // view metadata, None since torch 0.4 (older shared-storage views are not read).
        if (pid.kind != Kind::Tuple || pid.items.size() != (legacy_ ? 6u : 5u))
            bad(STK_E_CORRUPT, legacy_ ? "persistent id is not a 6-tuple ('storage', type, key, location, numel, view)"
                                       : "persistent id is not a 5-tuple ('storage', type, key, location, numel)");
        if (legacy_ && get(pid.items[5]).kind != Kind::None)
            bad(STK_E_UNSUPPORTED, "legacy storage view metadata (a file from torch < 0.4)");
        const Obj &tag = get(pid.items[0]);
        if (tag.kind != Kind::Str || tag.s != "storage") bad(STK_E_CORRUPT, "persistent id is not a 'storage' record");
        const Obj &type = get(pid.items[1]);
        if (type.kind != Kind::Global || type.s.rfind("torch.", 0) != 0 || type.fn != Fn::NotCallable || type.s == "torch.Tensor")
            bad(STK_E_CORRUPT, "persistent id names no torch storage type");
        const Obj &key = get(pid.items[2]);
        if (key.kind != Kind::Str || key.s.empty()) bad(STK_E_CORRUPT, "persistent id key is not a string");
        if (get(pid.items[3]).kind != Kind::Str) bad(STK_E_CORRUPT, "persistent id location is not a string");
        uint64_t numel = as_dim(pid.items[4], "persistent id numel is not a non-negative int");
        SrcDType dt = kStorages[type.i].dtype;
        auto it = storage_by_key_.find(key.s);
        uint32_t idx;
        if (it != storage_by_key_.end()) {
            idx = it->second;
            const PickledStorage &s = out_.storages[idx];
            if (s.dtype != dt || s.numel != numel)
                throw_error(STK_E_CORRUPT, "%s: storage '%s' is named twice with different types or sizes (offset %zu)",
                            where_.c_str(), printable(key.s).c_str(), op_);
        } else {
            idx = uint32_t(out_.storages.size());
            out_.storages.push_back({key.s, dt, numel});
            storage_by_key_[key.s] = idx;
        }
        Obj o;
        o.kind = Kind::Storage;
        o.i = idx;
        return make(std::move(o));
    }

    uint32_t make_tensor(const std::vector<uint32_t> &a, bool v2) {
        if (v2 ? (a.size() != 6 && a.size() != 7) : a.size() != 4)
            bad(STK_E_CORRUPT, v2 ? "_rebuild_tensor_v2 expects 6 or 7 arguments" : "_rebuild_tensor expects 4 arguments");
        if (get(a[0]).kind != Kind::Storage) bad(STK_E_CORRUPT, "tensor rebuilt from something that is not a storage");
        PickledTensor t;
        t.storage = uint32_t(get(a[0]).i);
        t.offset = as_dim(a[1], "tensor storage offset is not a non-negative int");
        t.shape = as_dims(a[2], "tensor size is not a tuple of non-negative ints");
        t.stride = as_dims(a[3], "tensor stride is not a tuple of non-negative ints");
        if (t.shape.size() != t.stride.size()) bad(STK_E_CORRUPT, "tensor size and stride have different ranks");
        Obj o;
        o.kind = Kind::Tensor;
        o.i = int64_t(out_.tensors.size());
        out_.tensors.push_back(std::move(t));
        return make(std::move(o));
    }

    uint32_t apply(uint32_t fn_id, uint32_t args_id) {
        const Obj &f = get(fn_id);
        if (f.kind != Kind::Global) bad(STK_E_UNSAFE_PICKLE, "REDUCE on an object that is not an allowlisted callable");
        const Obj &args = get(args_id);
        if (args.kind != Kind::Tuple) bad(STK_E_CORRUPT, "REDUCE arguments are not a tuple");
        std::vector<uint32_t> a = args.items;
        switch (f.fn) {
            case Fn::OrderedDict: {
                if (!a.empty()) bad(STK_E_UNSAFE_PICKLE, "OrderedDict called with arguments");
                Obj o;
                o.kind = Kind::Dict;
                return make(std::move(o));
            }
            case Fn::RebuildTensor: return make_tensor(a, false);
            case Fn::RebuildTensorV2: return make_tensor(a, true);
            case Fn::RebuildParameter:
            case Fn::RebuildParameterWithState:
            case Fn::Parameter:
                if (a.empty() || get(a[0]).kind != Kind::Tensor) bad(STK_E_CORRUPT, "Parameter rebuilt from a non-tensor");
                return a[0];
            case Fn::Size: {
                if (a.size() != 1 || (get(a[0]).kind != Kind::Tuple && get(a[0]).kind != Kind::List))
                    bad(STK_E_CORRUPT, "torch.Size expects one tuple");
                Obj o;
                o.kind = Kind::Tuple;
                o.items = get(a[0]).items;
                return make(std::move(o));
            }
            case Fn::RebuildFromTypeV2: {
                // (func, new_type, args, state): only plain tensors / parameters.
                if (a.size() != 4) bad(STK_E_CORRUPT, "_rebuild_from_type_v2 expects 4 arguments");
                const Obj &ty = get(a[1]);
                if (ty.kind != Kind::Global || (ty.s != "torch.Tensor" && ty.s != "torch.nn.parameter.Parameter"))
                    bad(STK_E_UNSAFE_PICKLE, "_rebuild_from_type_v2 with a type other than torch.Tensor / Parameter");
                if (get(a[0]).kind != Kind::Global || get(a[0]).fn == Fn::RebuildFromTypeV2)
                    bad(STK_E_UNSAFE_PICKLE, "_rebuild_from_type_v2 with a function that is not allowlisted");
                return apply(a[0], a[2]);
            }
            case Fn::CodecsEncode: {
                // Protocol 2 pickles bytes as _codecs.encode(str, 'latin1').
                if (a.size() != 2 || get(a[0]).kind != Kind::Str || get(a[1]).kind != Kind::Str ||
                    (get(a[1]).s != "latin1" && get(a[1]).s != "latin-1"))
                    bad(STK_E_UNSUPPORTED, "_codecs.encode other than (str, 'latin1')");
                Obj o;
                o.kind = Kind::Bytes;
                const std::string &s = get(a[0]).s;
                for (size_t i = 0; i < s.size(); i++) {
                    unsigned char c = static_cast<unsigned char>(s[i]);
                    if (c < 0x80) {
                        o.s += char(c);
                    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size() && c <= 0xC3) {
                        o.s += char(((c & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F));
                        i++;
                    } else {
                        bad(STK_E_CORRUPT, "_codecs.encode of a character outside latin-1");
                    }
                }
                return make(std::move(o));
            }
            case Fn::Unsupported:
                throw_error(STK_E_UNSUPPORTED,
                            "%s: the pickle rebuilds a tensor with %s (sparse, quantized, meta or nested "
                            "tensors are not read; offset %zu)",
                            where_.c_str(), f.s.c_str(), op_);
            case Fn::NotCallable: break;
        }
        throw_error(STK_E_UNSAFE_PICKLE, "%s: the pickle calls '%s', which is not an allowed callable (offset %zu)",
                    where_.c_str(), printable(f.s).c_str(), op_);
    }

    void setitems(uint32_t dict_id, const std::vector<uint32_t> &kv) {
        if (get(dict_id).kind != Kind::Dict) bad(STK_E_UNSAFE_PICKLE, "SETITEM(S) on an object that is not a dict");
        if (kv.size() % 2) bad(STK_E_CORRUPT, "SETITEMS with an odd number of items");
        Obj &d = objs_[dict_id];
        d.items.insert(d.items.end(), kv.begin(), kv.end());
    }

    void appends(uint32_t list_id, const std::vector<uint32_t> &v, Kind want) {
        if (get(list_id).kind != want)
            bad(STK_E_UNSAFE_PICKLE, want == Kind::List ? "APPEND(S) on an object that is not a list" : "ADDITEMS on a non-set");
        Obj &l = objs_[list_id];
        l.items.insert(l.items.end(), v.begin(), v.end());
    }

    uint32_t string_obj(Kind k, size_t len) {
        const uint8_t *p = take(len);
        Obj o;
        o.kind = k;
        o.s.assign(reinterpret_cast<const char *>(p), len);
        return push_new(std::move(o));
    }

    size_t len32() { return load_u32(take(4)); }
    size_t len64() {
        uint64_t v = load_u64(take(8));
        if (v > n_) bad(STK_E_TRUNCATED, "length longer than the pickle");
        return size_t(v);
    }

    uint32_t execute() {
        while (true) {
            if (pos_ >= n_) bad(STK_E_TRUNCATED, "the pickle ends without STOP");
            op_ = pos_;
            uint8_t op = d_[pos_++];
            switch (op) {
                case 0x80: {  // PROTO
                    uint8_t v = *take(1);
                    if (v < 2 || v > 5) bad(STK_E_UNSUPPORTED, "pickle protocol outside 2..5");
                    break;
                }
                case 0x95: take(8); break;  // FRAME: a length hint only
                case '.': {                 // STOP
                    if (!marks_.empty() || stack_.size() != 1) bad(STK_E_CORRUPT, "STOP with a stack that is not one object");
                    return stack_.back();
                }
                case '(': marks_.push_back(stack_.size()); break;
                case '0': pop(); break;
                case '1': pop_mark(); break;
                case '2': push(top()); break;
                case 'N': push_new(Obj{}); break;
                case 0x88:
                case 0x89: {
                    Obj o;
                    o.kind = Kind::Bool;
                    o.i = op == 0x88;
                    push_new(std::move(o));
                    break;
                }
                case 'J': {
                    Obj o;
                    o.kind = Kind::Int;
                    o.i = int32_t(load_u32(take(4)));
                    push_new(std::move(o));
                    break;
                }
                case 'K': {
                    Obj o;
                    o.kind = Kind::Int;
                    o.i = *take(1);
                    push_new(std::move(o));
                    break;
                }
                case 'M': {
                    Obj o;
                    o.kind = Kind::Int;
                    o.i = load_u16(take(2));
                    push_new(std::move(o));
                    break;
                }
                case 0x8a:
                case 0x8b: {  // LONG1 / LONG4: little-endian two's complement
                    size_t len = op == 0x8a ? *take(1) : len32();
                    const uint8_t *p = take(len);
                    Obj o;
                    o.kind = len <= 8 ? Kind::Int : Kind::BigInt;
                    if (len > 0 && len <= 8) {
                        uint64_t v = 0;
                        for (size_t i = 0; i < len; i++) v |= uint64_t(p[i]) << (8 * i);
                        if (len < 8 && (p[len - 1] & 0x80)) v |= ~uint64_t(0) << (8 * len);
                        o.i = int64_t(v);
                    }
                    push_new(std::move(o));
                    break;
                }
                case 'G': {  // BINFLOAT, big-endian
                    const uint8_t *p = take(8);
                    uint64_t v = 0;
                    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
                    Obj o;
                    o.kind = Kind::Float;
                    std::memcpy(&o.f, &v, 8);
                    push_new(std::move(o));
                    break;
                }
                case 'X': string_obj(Kind::Str, len32()); break;     // BINUNICODE
                case 0x8c: string_obj(Kind::Str, *take(1)); break;   // SHORT_BINUNICODE
                case 0x8d: string_obj(Kind::Str, len64()); break;    // BINUNICODE8
                case 'T': string_obj(Kind::Str, len32()); break;     // BINSTRING (py2 str)
                case 'U': string_obj(Kind::Str, *take(1)); break;    // SHORT_BINSTRING
                case 'B': string_obj(Kind::Bytes, len32()); break;   // BINBYTES
                case 'C': string_obj(Kind::Bytes, *take(1)); break;  // SHORT_BINBYTES
                case 0x8e: string_obj(Kind::Bytes, len64()); break;  // BINBYTES8
                case ')': {
                    Obj o;
                    o.kind = Kind::Tuple;
                    push_new(std::move(o));
                    break;
                }
                case ']':
                case '}':
                case 0x8f: {
                    Obj o;
                    o.kind = op == ']' ? Kind::List : op == '}' ? Kind::Dict : Kind::Set;
                    push_new(std::move(o));
                    break;
                }
                case 't':
                case 'l':
                case 0x91: {  // TUPLE, LIST, FROZENSET from the mark
                    Obj o;
                    o.kind = op == 't' ? Kind::Tuple : op == 'l' ? Kind::List : Kind::Set;
                    o.items = pop_mark();
                    push_new(std::move(o));
                    break;
                }
                case 'd': {  // DICT from the mark
                    std::vector<uint32_t> kv = pop_mark();
                    Obj o;
                    o.kind = Kind::Dict;
                    uint32_t id = push_new(std::move(o));
                    setitems(id, kv);
                    break;
                }
                case 0x85:
                case 0x86:
                case 0x87: {  // TUPLE1..3
                    size_t k = size_t(op - 0x84);
                    Obj o;
                    o.kind = Kind::Tuple;
                    o.items.resize(k);
                    for (size_t i = k; i-- > 0;) o.items[i] = pop();
                    push_new(std::move(o));
                    break;
                }
                case 'a': {
                    uint32_t v = pop();
                    appends(top(), {v}, Kind::List);
                    break;
                }
                case 'e': {
                    std::vector<uint32_t> v = pop_mark();
                    appends(top(), v, Kind::List);
                    break;
                }
                case 0x90: {
                    std::vector<uint32_t> v = pop_mark();
                    appends(top(), v, Kind::Set);
                    break;
                }
                case 's': {
                    uint32_t v = pop();
                    uint32_t k = pop();
                    setitems(top(), {k, v});
                    break;
                }
                case 'u': {
                    std::vector<uint32_t> kv = pop_mark();
                    setitems(top(), kv);
                    break;
                }
                case 'h': memo_get(*take(1)); break;
                case 'j': memo_get(load_u32(take(4))); break;
                case 'q': memo_put(*take(1)); break;
                case 'r': memo_put(load_u32(take(4))); break;
                case 0x94: memo_put(uint32_t(memo_.size())); break;  // MEMOIZE
                case 'c': {
                    std::string module = read_line();
                    std::string name = read_line();
                    push(global(module, name));
                    break;
                }
                case 0x93: {  // STACK_GLOBAL
                    uint32_t name = pop();
                    uint32_t module = pop();
                    if (get(name).kind != Kind::Str || get(module).kind != Kind::Str)
                        bad(STK_E_CORRUPT, "STACK_GLOBAL with non-string names");
                    push(global(get(module).s, get(name).s));
                    break;
                }
                case 'Q': {  // BINPERSID
                    uint32_t pid = pop();
                    push(storage_from_pid(pid));
                    break;
                }
                case 'R': {  // REDUCE
                    uint32_t args = pop();
                    uint32_t fn = pop();
                    push(apply(fn, args));
                    break;
                }
                case 0x81: {  // NEWOBJ: cls.__new__(cls, *args) - only OrderedDict()
                    uint32_t args = pop();
                    uint32_t cls = pop();
                    if (get(cls).kind != Kind::Global || get(cls).fn != Fn::OrderedDict)
                        bad(STK_E_UNSAFE_PICKLE, "NEWOBJ on a class other than collections.OrderedDict");
                    push(apply(cls, args));
                    break;
                }
                case 'b': {  // BUILD: state on a dict (OrderedDict._metadata) or tensor is ignored
                    pop();
                    Kind k = get(top()).kind;
                    if (k != Kind::Dict && k != Kind::Tensor)
                        bad(STK_E_UNSAFE_PICKLE, "BUILD on an object that is not a dict or tensor");
                    break;
                }
                default: {
                    char msg[96];
                    std::snprintf(msg, sizeof msg, "opcode 0x%02x is not allowed in a weights-only pickle", op);
                    bad(STK_E_UNSAFE_PICKLE, msg);
                }
            }
        }
    }

    void memo_get(uint32_t k) {
        auto it = memo_.find(k);
        if (it == memo_.end()) bad(STK_E_CORRUPT, "memo GET of a key never PUT");
        push(it->second);
    }
    void memo_put(uint32_t k) { memo_[k] = top(); }

    void flatten(uint32_t dict_id, const std::string &prefix, int depth, std::vector<uint8_t> &visited) {
        if (depth > 32) throw_error(STK_E_CORRUPT, "%s: dicts nested more than 32 deep", where_.c_str());
        if (visited[dict_id])
            throw_error(STK_E_CORRUPT, "%s: a dict is reachable twice (shared or cyclic) under '%s'", where_.c_str(),
                        printable(prefix).c_str());
        visited[dict_id] = 1;
        const std::vector<uint32_t> items = objs_[dict_id].items;
        for (size_t i = 0; i + 1 < items.size(); i += 2) {
            const Obj &k = get(items[i]);
            std::string key;
            if (k.kind == Kind::Str) key = k.s;
            else if (k.kind == Kind::Int) key = std::to_string(k.i);
            else throw_error(STK_E_CORRUPT, "%s: a dict key is a %s, not a string", where_.c_str(), kind_name(k.kind));
            std::string name = prefix.empty() ? key : prefix + "." + key;
            const Obj &v = get(items[i + 1]);
            if (v.kind == Kind::Dict) {
                flatten(items[i + 1], name, depth + 1, visited);
            } else if (v.kind == Kind::Tensor) {
                PickledTensor t = out_.tensors[size_t(v.i)];
                t.name = name;
                named_.push_back(std::move(t));
            }
        }
        if (depth == 0) out_.tensors = std::move(named_);
    }
    std::vector<PickledTensor> named_;
};

}  // namespace

bool torch_storage_dtype(const std::string &name, SrcDType *out) {
    for (const StorageDef &s : kStorages)
        if (name == s.name) {
            *out = s.dtype;
            return true;
        }
    return false;
}

PickleResult unpickle_state_dict(const uint8_t *data, size_t size, const std::string &where) {
    Unpickler u(data, size, where);
    return u.run();
}

LegacyLayout unpickle_legacy(const uint8_t *data, size_t size, const std::string &where) {
    Unpickler u(data, size, where);
    return u.run_legacy();
}

}  // namespace stk
