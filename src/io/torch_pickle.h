// PyTorch's zip format (torch.save since 1.6), both ways. The reader: a zip whose data.pkl is a pickle
// (protocol 2) of the saved object, with each tensor's storage in data/<key>. LibTorch's own unpickler turns
// collections.OrderedDict into None, which loses every state_dict() a Python user saves; this reader implements the
// part of the pickle machine that state dicts use (dicts, OrderedDicts, tuples, lists, strings, numbers, tensors and
// parameters) and nothing that runs code: any other object (a training checkpoint's argparse.Namespace) is kept inert,
// as its class name.
#pragma once

#include <string>

#include "io/weights.h"

namespace mpt::io {

// The name -> tensor pairs of the dict `bytes` holds, in file order; a training-checkpoint wrapper
// ({"state_dict": ...} or {"model": ...}) is unwrapped. Errors name `source` and the pickle byte offset.
NamedTensorList read_torch_state_dict(const std::string& bytes, const std::string& source);

// Checks every tensor storage a LibTorch archive (torch::serialize, TorchScript) declares in its pickles against
// the zip record that holds it, building nothing; returns what is wrong (naming `source`), or "". LibTorch's own
// reader trusts the declared size and reads past a shorter record.
std::string check_archive_storages(const char* bytes, size_t size, const std::string& source);

// The bytes torch.save writes for an OrderedDict of `tensors` (CPU copies, in order): a plain state dict that
// torch.load(weights_only=True) and load_state_dict(strict=True) accept.
std::string encode_torch_state_dict(const NamedTensorList& tensors);

}  // namespace mpt::io
