// See torch_records.h.
#include "io/torch_records.h"

#include <map>

#include "common/error.h"

namespace mpt::io {

size_t record_size(caffe2::serialize::PyTorchStreamReader& zip, const std::string& record, size_t archive_bytes,
                   const std::string& source) {
  const size_t size = zip.getRecordSize(record);
  if (size > archive_bytes)
    throw Error(source + ": record " + record + " inflates to " + std::to_string(size) + " bytes, more than the " +
                std::to_string(archive_bytes) + "-byte file holds (a compressed zip bomb; torch.save stores records " +
                "uncompressed)");
  return size;
}

std::string read_record(caffe2::serialize::PyTorchStreamReader& zip, const std::string& record, size_t archive_bytes,
                        const std::string& source) {
  record_size(zip, record, archive_bytes, source);
  auto [data, size] = zip.getRecord(record);
  return std::string(static_cast<const char*>(data.get()), size);
}

torch::ScalarType storage_dtype(const std::string& global) {
  static const std::map<std::string, torch::ScalarType> types = {
      {"torch.FloatStorage", torch::kFloat}, {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},   {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},   {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort}, {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},   {"torch.BoolStorage", torch::kBool}};
  auto it = types.find(global);
  if (it == types.end()) throw Error("storage type " + global + " is not one mpt reads");
  return it->second;
}

std::string tensor_view_problem(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset,
                                int64_t storage_numel) {
  if (offset < 0) return "a tensor at a negative storage offset";
  int64_t last = offset;
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || strides[i] < 0) return "a tensor with a negative size or stride";
    empty = empty || sizes[i] == 0;
    int64_t reach = 0;
    if (sizes[i] > 0 &&
        (__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) || __builtin_add_overflow(last, reach, &last)))
      return "a tensor reaches past its storage";
  }
  if (!empty && last >= storage_numel) return "a tensor reaches past its storage";
  int64_t numel = 1;  // strides of 0 let a small storage declare any size: bound the copy a rebuild makes
  for (const int64_t size : sizes)
    if (__builtin_mul_overflow(numel, size, &numel) || numel > (int64_t{1} << 40))
      return "a tensor of more than 2^40 elements";
  return "";
}

}  // namespace mpt::io
