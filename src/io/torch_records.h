// The zip side of a torch.save file (PyTorch's zip format): records read only when the archive can hold them,
// storage types, and tensor views checked to stay inside their storage. The pickle machine (unpickler.h) asks these.
#pragma once

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace mpt::io {

// The size of `record` in `zip` (an archive of `archive_bytes`). torch.save stores records uncompressed, so one that
// would inflate past the archive's own size is a zip bomb: refused with an Error naming `source` and the record
// before anything is allocated.
size_t record_size(caffe2::serialize::PyTorchStreamReader& zip, const std::string& record, size_t archive_bytes,
                   const std::string& source);
// The bytes of `record`, after record_size's check.
std::string read_record(caffe2::serialize::PyTorchStreamReader& zip, const std::string& record, size_t archive_bytes,
                        const std::string& source);

// "torch.FloatStorage" -> kFloat, ...; an Error for a type mpt does not read.
torch::ScalarType storage_dtype(const std::string& global);

// Why a view of `sizes` and `strides` at `offset` into a storage of `storage_numel` elements is refused (a negative
// size or stride, a reach past the storage, more than 2^40 elements), or "".
std::string tensor_view_problem(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset,
                                int64_t storage_numel);

}  // namespace mpt::io
