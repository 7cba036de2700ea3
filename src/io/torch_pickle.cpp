// Reading torch.save state dicts and checking LibTorch archives, over the pickle machine of unpickler.h.
#include "io/torch_pickle.h"

#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>

#include "common/error.h"
#include "io/torch_records.h"
#include "io/unpickler.h"

namespace mpt::io {
namespace {

NamedTensorList tensors_of(const ValuePtr& dict, const std::string& source, int wrappers = 0) {
  if (dict->kind != Value::Kind::kDict) throw Error(source + ": holds a pickled object that is not a dict of tensors");
  for (const char* wrapper : {"state_dict", "model"})  // training checkpoints wrap the state dict
    for (const auto& [key, value] : dict->pairs)
      if (key->kind == Value::Kind::kString && key->text == wrapper && value->kind == Value::Kind::kDict) {
        if (wrappers >= 4) throw Error(source + ": state dicts wrapped more than 4 deep (or wrapped in themselves)");
        return tensors_of(value, source, wrappers + 1);
      }
  NamedTensorList tensors;
  for (const auto& [key, value] : dict->pairs) {
    if (key->kind != Value::Kind::kString) throw Error(source + ": a dict key is not a string");
    if (value->kind == Value::Kind::kObject)
      throw Error(source + ": '" + key->text + "' is a pickled " + value->text + " object, not a tensor");
    if (value->kind != Value::Kind::kTensor) throw Error(source + ": '" + key->text + "' is not a tensor");
    tensors.emplace_back(key->text, value->tensor);
  }
  return tensors;
}

}  // namespace

NamedTensorList read_torch_state_dict(const std::string& bytes, const std::string& source) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(
        std::make_shared<caffe2::serialize::MemoryReadAdapter>(bytes.data(), bytes.size()));
    if (!zip.hasRecord("data.pkl")) throw Error(source + ": a zip without data.pkl is not a torch.save file");
    const std::string pickle = read_record(zip, "data.pkl", bytes.size(), source);
    NamedTensorList tensors;
    unpickle(pickle, zip, bytes.size(), source, "data/", /*scan_only=*/false,
             [&](const ValuePtr& root) { tensors = tensors_of(root, source); });
    return tensors;
  } catch (const c10::Error& e) {
    throw Error(source + ": not a PyTorch zip file (" + e.what_without_backtrace() + ")");
  }
}

std::string check_archive_storages(const char* bytes, size_t size, const std::string& source) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(std::make_shared<caffe2::serialize::MemoryReadAdapter>(bytes, size));
    for (const std::string& record : zip.getAllRecords())
      record_size(zip, record, size, source);  // LibTorch reads them all
    for (const auto& [pickle_name, prefix] :
         {std::pair<std::string, std::string>{"data.pkl", "data/"}, {"constants.pkl", "constants/"}}) {
      if (!zip.hasRecord(pickle_name)) continue;
      const std::string pickle = read_record(zip, pickle_name, size, source);
      unpickle(pickle, zip, size, source, prefix, /*scan_only=*/true, [](const ValuePtr&) {});
    }
  } catch (const Error& e) {
    return e.what();
  } catch (const c10::Error& e) {
    return source + ": not a LibTorch archive (" + e.what_without_backtrace() + ")";
  }
  return "";
}

}  // namespace mpt::io
