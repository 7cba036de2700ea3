// Hand-written ops on every device there is, against LibTorch's own ops: the path the op's dispatch takes under
// MPT_PORTABLE_KERNELS=1, which is each kernel's reference (ggml's test-backend-ops runs every op on every backend
// the same way). A new device kernel adds one entry to kOps; the older CPU kernels have their own tests.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "ops/cuda/cuda_ops.h"
#include "ops/dispatch.h"
#include "ops/gelu.h"
#include "ops/mxfp8.h"
#include "tests/support/helpers.h"

namespace {

using Tensors = std::vector<torch::Tensor>;

struct DeviceOp {
  std::string name;
  std::function<torch::Tensor(torch::Device)> input;
  std::function<bool(const torch::Tensor&)> has_kernel;  // the op's own supports check for this input
  std::function<Tensors(const torch::Tensor&)> run;      // the outputs to compare
  double tolerance;                                      // 0: bit for bit
};

// Values an MXFP8 cast must get right: ordinary blocks over many magnitudes, an all-zero block, one with a NaN,
// one with an Inf, subnormal FP32 amaxes and values that round to E4M3's subnormals.
torch::Tensor mxfp8_input(torch::Device device) {
  torch::manual_seed(7);
  torch::Tensor x = torch::randn({16, 256}) * torch::pow(2.0, torch::randint(-30, 30, {16, 1}).to(torch::kFloat));
  x[1].slice(0, 0, 32).zero_();
  x[2][5] = std::numeric_limits<float>::quiet_NaN();
  x[3][70] = -std::numeric_limits<float>::infinity();
  x[4].slice(0, 32, 64).mul_(1e-40);
  x[5].slice(0, 0, 32).fill_(0.001f), x[5][0] = 448.0f;
  return x.to(device);
}

const std::vector<DeviceOp> kOps = {
    {"MXFP8 cast", mxfp8_input, [](const torch::Tensor& x) { return mpt::ops::cuda::supports_to_mxfp8(x); },
     [](const torch::Tensor& x) {
       const mpt::ops::MxTensor t = mpt::ops::to_mxfp8(x);
       return Tensors{t.data.view(torch::kByte), t.scales};
     },
     0.0},
    {"MXFP8 cast of BF16", [](torch::Device d) { return mxfp8_input(d).to(torch::kBFloat16); },
     [](const torch::Tensor& x) { return mpt::ops::cuda::supports_to_mxfp8(x); },
     [](const torch::Tensor& x) {
       const mpt::ops::MxTensor t = mpt::ops::to_mxfp8(x);
       return Tensors{t.data.view(torch::kByte), t.scales};
     },
     0.0},
    {"GELU",
     [](torch::Device d) {
       return torch::randn({64, 384}, torch::TensorOptions().device(d));
     },
     [](const torch::Tensor& x) { return x.is_cpu() && mpt::ops::avx512_bf16_kernels(); },
     [](const torch::Tensor& x) { return Tensors{mpt::ops::gelu(x)}; }, 1e-6},
};

// The op's outputs from its kernel and from LibTorch's ops, compared; false when no kernel takes this input.
bool matches_reference(const DeviceOp& op, torch::Device device) {
  const torch::Tensor x = op.input(device);
  if (!op.has_kernel(x)) return false;
  const Tensors kernel = op.run(x);
  mpt::ops::force_portable_kernels(true);
  const Tensors reference = op.run(x);
  mpt::ops::force_portable_kernels(false);
  REQUIRE(kernel.size() == reference.size());
  for (size_t i = 0; i < kernel.size(); ++i) {
    INFO(op.name << " on " << device << ", output " << i);
    REQUIRE(kernel[i].sizes() == reference[i].sizes());
    if (op.tolerance == 0)
      CHECK(torch::equal(kernel[i].cpu(), reference[i].cpu()));
    else
      CHECK(torch::allclose(kernel[i].cpu(), reference[i].cpu(), 0, op.tolerance));
  }
  return true;
}

// Runs every op on `device`; the names of those without a kernel there.
std::vector<std::string> check_device(torch::Device device) {
  std::vector<std::string> without;
  for (const DeviceOp& op : kOps)
    if (!matches_reference(op, device)) without.push_back(op.name);
  return without;
}

}  // namespace

TEST_CASE("the table's CPU kernels equal LibTorch's ops on the same input", "[fast][ops]") {
  const auto without = check_device(torch::kCPU);
  if (without.size() == kOps.size()) MPT_SKIP("no hand-written kernel runs on this CPU (no AVX512-BF16)");
  for (const auto& name : without) WARN(name << ": no CPU kernel here, LibTorch's ops only");
}

TEST_CASE("the table's CUDA kernels equal LibTorch's ops on the same input", "[gpu]") {
  if (!mpt::ops::cuda::kernels_built()) MPT_SKIP("this build has no CUDA kernels (no nvcc or a CPU LibTorch)");
  if (!torch::cuda::is_available()) MPT_SKIP("no CUDA device visible");
  const auto without = check_device(torch::Device(torch::kCUDA, 0));
  CHECK(without.size() < kOps.size());  // the MXFP8 casts at least
  for (const auto& name : without) WARN(name << ": no CUDA kernel, LibTorch's ops only");
}
