// The pickle machine behind torch_pickle.h: the subset of Python's pickle that torch.save writes for state dicts
// (dicts, OrderedDicts, tuples, lists, strings, numbers, storages, tensors and parameters), bounded in depth and
// stack, reading nothing it does not model as anything but an inert value. Opcodes follow Lib/pickletools.py.
#pragma once

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mpt::io {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

// One pickle value. Containers are shared, as pickle's memo shares them.
struct Value {
  // kObject: an instance of a class this reader does not build (argparse.Namespace in a training checkpoint),
  // kept as its class name only: nothing in a file is ever called.
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor,
    kMark,
    kObject
  };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;                                  // string; "module.name" of a global
  std::vector<ValuePtr> items;                       // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> pairs;  // dict, in insertion order
  torch::Tensor tensor;                              // storage (1-D) or tensor
  int64_t depth = 0;                                 // containers nested inside this one
};

// Runs `pickle`, reading tensor storages from `zip` (records under `record_prefix`), and hands the unpickled
// value to `use` while its containers are alive: after it returns they are emptied, which breaks any cycle a
// crafted file made through the memo. `scan_only` checks each declared storage against its record and builds
// nothing; objects it does not model (LibTorch's modules) pass as opaque values. Errors name `source` and the
// byte offset.
void unpickle(const std::string& pickle, caffe2::serialize::PyTorchStreamReader& zip, size_t archive_bytes,
              const std::string& source, const std::string& record_prefix, bool scan_only,
              const std::function<void(const ValuePtr&)>& use);

}  // namespace mpt::io
