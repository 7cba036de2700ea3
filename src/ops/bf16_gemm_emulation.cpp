// One boxed kernel serves every emulated op: it rounds the floating inputs to BF16 (kept in FP32), calls the
// op below autocast, and rounds the floating outputs to BF16, so autograd's backward runs the FP32 products.
#include "ops/bf16_gemm_emulation.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "common/cpu_features.h"

namespace mpt::ops {
namespace {

bool is_float_or_bf16(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16);
}

// Autocast's own policy for another dtype (numerics' FP16 on the CPU): FP32 and BF16 inputs cast to it.
void cast_to_autocast_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack, at::ScalarType dtype) {
  const size_t arguments = op.schema().arguments().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(arguments); it != stack->end(); ++it)
    if (it->isTensor() && is_float_or_bf16(it->toTensor())) *it = it->toTensor().to(dtype);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  op.callBoxed(stack);
}

void emulate_in_fp32(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::ScalarType dtype = at::autocast::get_autocast_dtype(at::kCPU);
  if (dtype != at::kBFloat16) return cast_to_autocast_dtype(op, stack, dtype);
  const size_t arguments = op.schema().arguments().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(arguments); it != stack->end(); ++it)
    if (it->isTensor() && is_float_or_bf16(it->toTensor())) *it = it->toTensor().to(at::kBFloat16).to(at::kFloat);
  {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
    op.callBoxed(stack);
  }
  const size_t returns = op.schema().returns().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(returns); it != stack->end(); ++it)
    if (it->isTensor() && is_float_or_bf16(it->toTensor())) *it = it->toTensor().to(at::kBFloat16);
}

// Swallows the dispatcher's "overriding a previously registered kernel" warnings: replacing autocast's kernels
// is the point here.
struct QuietWarnings : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

}  // namespace

bool cpu_has_fast_bf16_gemm() { return cpu_features().avx512_core || cpu_features().amx_bf16; }

bool enable_cpu_bf16_emulation() {
  static const bool enabled = [] {
    const char* forced = std::getenv("MPT_BF16_EMULATION");
    const bool on = forced && *forced ? std::string(forced) == "1" : !cpu_has_fast_bf16_gemm();
    if (!on) return false;
    static torch::Library library(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastCPU, __FILE__, __LINE__);
    QuietWarnings quiet;
    c10::WarningUtils::WarningHandlerGuard guard(&quiet);
    for (const char* op : {"linear", "conv1d", "conv2d", "conv3d", "conv1d.padding", "conv2d.padding", "conv3d.padding",
                           "mm", "bmm", "matmul", "addmm", "baddbmm"})
      library.impl(op, torch::CppFunction::makeFromBoxedFunction<&emulate_in_fp32>());
    return true;
  }();
  return enabled;
}

}  // namespace mpt::ops
