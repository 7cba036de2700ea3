// The Tensor Core shape check: a walk over the model's Linear and Conv2d modules.
#include "models/tensor_core_shapes.h"

#include <fmt/format.h>

namespace mpt::models {
namespace {

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

int64_t tensor_core_multiple(precision::Mode mode, bool tf32) {
  // 16 bytes of operand elements: 16 of FP8, 8 of BF16/FP16; FP32 reaches Tensor Cores only as TF32.
  const int bytes = precision::operand_bytes(mode);
  if (bytes < 4) return 16 / bytes;
  return tf32 ? 4 : 0;
}

TensorCoreShapes tensor_core_shapes(const ModelImpl& model, const precision::PrecisionConfig& precision,
                                    const data::SampleShape& sample, int64_t batch_size) {
  TensorCoreShapes shapes;
  shapes.multiple = tensor_core_multiple(precision.mode, precision.tf32);
  if (shapes.multiple == 0) return shapes;
  const int64_t multiple = shapes.multiple;
  // The FP32 islands do not run in the compute dtype under mixed precision. Under TF32 they do, but they are the
  // output layer (its width is the data's class count) and the norms: skipped alike, so a 10-class head does not
  // raise a warning in every TF32 run.
  const precision::ModulePolicy policy(precision.fp32_modules);
  auto check = [&](const std::string& where, const std::string& dim, int64_t value) {
    if (value % multiple != 0) shapes.misfits.push_back({where, dim, value, round_up(value, multiple)});
  };

  bool rows_reach_a_gemm = false;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    if (policy.runs_in_fp32(name)) continue;
    if (const auto* linear = item.value()->as<torch::nn::Linear>()) {
      rows_reach_a_gemm = true;
      check(name, "in_features", linear->options.in_features());
      check(name, "out_features", linear->options.out_features());
    } else if (const auto* conv = item.value()->as<torch::nn::Conv2d>()) {
      const int64_t groups = conv->options.groups();
      const int64_t in_per_group = conv->options.in_channels() / groups;
      if (in_per_group >= multiple) check(name, "in_channels", in_per_group);
      check(name, "out_channels", conv->options.out_channels() / groups);
    }
  }
  for (const auto& [what, value] : model.functional_gemm_dims(policy)) {
    rows_reach_a_gemm = true;
    check(what, "size", value);
  }
  if (rows_reach_a_gemm && batch_size > 0) {  // named by the spec keys that set them
    if (sample.seq_len > 0)
      check("data.batch_size x data.seq_len", "rows", batch_size * sample.seq_len);
    else
      check("data.batch_size", "rows", batch_size);
  }
  return shapes;
}

std::string describe(const TensorCoreShapes& shapes) {
  if (shapes.multiple == 0) return "";
  if (shapes.misfits.empty())
    return fmt::format("Tensor Core shapes: every GEMM and convolution dimension is a multiple of {}", shapes.multiple);
  std::string list;
  for (const auto& m : shapes.misfits)
    list += fmt::format("{}{} {} {} (-> {})", list.empty() ? "" : ", ", m.where, m.dim, m.value, m.rounded);
  return fmt::format(
      "Tensor Core shapes: {} dimension{} not a multiple of {}, which CUDA runs with padded tiles or "
      "without Tensor Cores: {}",
      shapes.misfits.size(), shapes.misfits.size() == 1 ? " is" : "s are", shapes.multiple, list);
}

nlohmann::json to_json(const TensorCoreShapes& shapes) {
  if (shapes.multiple == 0) return nullptr;
  nlohmann::json misfits = nlohmann::json::array();
  for (const auto& m : shapes.misfits)
    misfits.push_back({{"where", m.where}, {"dim", m.dim}, {"value", m.value}, {"rounded", m.rounded}});
  return {{"multiple", shapes.multiple}, {"misfits", misfits}};
}

}  // namespace mpt::models
