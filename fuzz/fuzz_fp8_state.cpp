// FP8 state in a checkpoint: the input's bytes become a layer's amax histories and scales (raw FP32), checked by
// the content check load_checkpoint runs on a resumed checkpoint's FP8 tensors. What the check lets through must
// cast and update without a NaN from finite values and keep every scale positive and finite. The checkpoint
// container itself (zip records, CRCs) is the weights harness's; here the state goes to the check in memory, so
// a run reaches its million inputs.
#include <cmath>
#include <cstring>

#include "fuzz/harness.h"
#include "precision/fp8.h"

namespace {

struct OneLinear : torch::nn::Module {
  OneLinear() { layer = register_module("proj", torch::nn::Linear(16, 16)); }
  torch::nn::Linear layer{nullptr};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static OneLinear model;
  static mpt::precision::Fp8Config config = [] {
    mpt::precision::Fp8Config c;
    c.amax_history = 4;
    return c;
  }();
  if (size < 2) return 0;
  config.recipe = data[0] % 2 ? "current" : "delayed";
  config.margin = data[1] % 4;
  data += 2, size -= 2;

  mpt::precision::Fp8Gemms fp8(config, model, mpt::precision::ModulePolicy(), torch::kCPU);
  torch::OrderedDict<std::string, torch::Tensor> saved;
  for (const auto& [name, tensor] : fp8.state()) {  // fill history then scale, layer by layer, from the input
    const size_t bytes = std::min(size, static_cast<size_t>(tensor.numel()) * sizeof(float));
    if (bytes > 0) std::memcpy(tensor.data_ptr<float>(), data, bytes);
    data += bytes, size -= bytes;
    saved.insert(name, tensor);
  }
  if (!fp8.check_state(saved).empty()) return 0;  // refused: the check named what is wrong
  // Accepted: a step's casts and the scale update must stay finite.
  const torch::Tensor x = torch::linspace(-3.0, 3.0, 256).reshape({16, 16});
  auto* layer = fp8.layer_for(model.layer->weight);
  for (auto* scale : {&layer->input, &layer->weight, &layer->grad_output}) {
    const torch::Tensor used = scale->scale_for(x, /*record=*/true);
    const torch::Tensor cast = mpt::ops::to_float8(x, used, scale->format).to(torch::kFloat);
    if (torch::isnan(cast).any().item<bool>()) std::abort();
    scale->update();
    const float after = scale->scale.item<float>();
    if (!(after > 0.0f) || !std::isfinite(after)) std::abort();
  }
  return 0;
}
