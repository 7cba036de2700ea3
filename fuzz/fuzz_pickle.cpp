// torch.save's pickle: the input is data.pkl inside a well-formed PyTorch zip, so the fuzzer works on the pickle
// machine rather than on the zip container (fuzz_weights covers the container).
#include <caffe2/serialize/inline_container.h>

#include "fuzz/harness.h"
#include "io/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string zip;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&zip](const void* bytes, size_t n) {
      zip.append(static_cast<const char*>(bytes), n);
      return n;
    });
    writer.writeRecord("data.pkl", data, size);
    const float storage[4] = {1, 2, 3, 4};
    writer.writeRecord("data/0", storage, sizeof storage);
    writer.writeEndOfFile();
  }
  mpt::fuzz::refusals_only([&] { mpt::io::read_torch_state_dict(zip, "fuzz.pt"); });
  return 0;
}
