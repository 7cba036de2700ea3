// The writer half of torch_pickle.h: what Python's torch.save writes for an OrderedDict of tensors, opcode for
// opcode, so that torch.load(weights_only=True) accepts it (only its allow-listed globals, no TorchScript tags).
#include <caffe2/serialize/inline_container.h>

#include <map>

#include "common/error.h"
#include "io/torch_pickle.h"

namespace mpt::io {
namespace {

const char* storage_global(torch::ScalarType type, const std::string& tensor) {
  static const std::map<torch::ScalarType, const char*> names = {
      {torch::kFloat, "FloatStorage"},       {torch::kDouble, "DoubleStorage"}, {torch::kHalf, "HalfStorage"},
      {torch::kBFloat16, "BFloat16Storage"}, {torch::kLong, "LongStorage"},     {torch::kInt, "IntStorage"},
      {torch::kShort, "ShortStorage"},       {torch::kChar, "CharStorage"},     {torch::kByte, "ByteStorage"},
      {torch::kBool, "BoolStorage"}};
  auto it = names.find(type);
  if (it == names.end())
    throw Error(tensor + ": dtype " + std::string(c10::toString(type)) + " has no torch.save form");
  return it->second;
}

// Pickle protocol 2, the subset a state dict needs (Python's Lib/pickletools.py names each opcode).
class Pickler {
 public:
  std::string bytes = "\x80\x02";  // PROTO 2

  void global(const std::string& module, const std::string& name) { bytes += "c" + module + "\n" + name + "\n"; }
  void mark() { bytes += '('; }
  void tuple() { bytes += 't'; }
  void empty_tuple() { bytes += ')'; }
  void reduce() { bytes += 'R'; }
  void persistent_id() { bytes += 'Q'; }
  void setitems() { bytes += 'u'; }
  void new_false() { bytes += '\x89'; }
  void stop() { bytes += '.'; }
  void string(const std::string& s) {
    bytes += 'X';
    little_endian(static_cast<uint32_t>(s.size()), 4);
    bytes += s;
  }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      bytes += 'J';  // BININT
      little_endian(static_cast<uint32_t>(v), 4);
    } else {
      bytes += "\x8a\x08";  // LONG1, 8 bytes of two's complement
      little_endian(static_cast<uint64_t>(v), 8);
    }
  }
  void int_tuple(c10::IntArrayRef values) {
    mark();
    for (int64_t v : values) integer(v);
    tuple();
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    empty_tuple();
    reduce();
  }

 private:
  void little_endian(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes += static_cast<char>((v >> (8 * i)) & 0xff);
  }
};

}  // namespace

std::string encode_torch_state_dict(const NamedTensorList& tensors) {
  std::vector<torch::Tensor> storages;
  Pickler p;
  p.empty_ordered_dict();
  p.mark();
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor t = tensor.detach().cpu().contiguous();
    const std::string key = std::to_string(storages.size());
    storages.push_back(t);
    p.string(name);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark();  // the persistent id: ('storage', torch.FloatStorage, key, 'cpu', numel)
    p.string("storage");
    p.global("torch", storage_global(t.scalar_type(), name));
    p.string(key);
    p.string("cpu");
    p.integer(t.numel());
    p.tuple();
    p.persistent_id();
    p.integer(0);  // storage offset
    p.int_tuple(t.sizes());
    p.int_tuple(t.strides());
    p.new_false();           // requires_grad
    p.empty_ordered_dict();  // backward hooks
    p.tuple();
    p.reduce();
  }
  p.setitems();
  p.stop();

  std::string out;
  caffe2::serialize::PyTorchStreamWriter zip([&out](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  zip.writeRecord("data.pkl", p.bytes.data(), p.bytes.size());
  zip.writeRecord("byteorder", "little", 6);
  for (size_t i = 0; i < storages.size(); ++i)
    zip.writeRecord("data/" + std::to_string(i), storages[i].data_ptr(), storages[i].nbytes());
  zip.writeEndOfFile();
  return out;
}

}  // namespace mpt::io
