// An allowlist unpickler for PyTorch's data.pkl, modelled on torch/_weights_only_unpickler.py:
// a state machine over the opcodes torch.save emits (protocols 2-5) that builds plain values
// (None, bool, int, float, str/bytes, tuple, list, dict) and interprets a fixed set of globals
// itself - collections.OrderedDict, torch._utils._rebuild_tensor(_v2), _rebuild_parameter(_with_state),
// torch.*Storage as persistent-id storage types.  It never imports or calls anything: any other
// GLOBAL / STACK_GLOBAL is STK_E_UNSAFE_PICKLE naming it; REDUCE / NEWOBJ / BUILD only apply to
// the allowlisted callables.  Every structure is bounded by the input size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ingest/checkpoint.h"

namespace stk {

struct PickledStorage {
    std::string key;  // persistent id key: archive entry "<prefix>/data/<key>"
    SrcDType dtype;
    uint64_t numel;  // elements of the storage as the pickle states it
};

struct PickledTensor {
    std::string name;     // dotted path of dict keys from the root ("model_state_dict.w")
    uint32_t storage;     // index into PickleResult::storages
    uint64_t offset = 0;  // storage offset, elements
    std::vector<uint64_t> shape;
    std::vector<uint64_t> stride;  // elements
};

struct PickleResult {
    std::vector<PickledStorage> storages;
    std::vector<PickledTensor> tensors;  // in pickle order
};

// Unpickle a state dict: the root must be a dict; nested dicts are flattened with '.'; values
// that are not tensors (ints, strings, None, ...) are skipped.  `where` names the stream in
// errors ("model.bin:archive/data.pkl"); offsets in messages are byte offsets in the stream.
PickleResult unpickle_state_dict(const uint8_t *data, size_t size, const std::string &where);

// PyTorch's legacy format (_use_new_zipfile_serialization=False, torch < 1.6): five pickles
// back to back (magic number, protocol version 1001, sys_info, the state dict with 6-tuple
// persistent ids, the list of storage keys), then each storage as an int64 element count and
// its raw bytes, in the order of that list.
struct LegacyLayout {
    PickleResult result;
    std::vector<std::string> storage_order;  // storage keys in file order
    uint64_t data_start = 0;                 // offset of the first storage record
};
LegacyLayout unpickle_legacy(const uint8_t *data, size_t size, const std::string &where);

// Storage type name ("FloatStorage") to its dtype; false if not a known storage type.
bool torch_storage_dtype(const std::string &name, SrcDType *out);

}  // namespace stk
