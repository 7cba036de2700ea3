// The thread-split FP32 batched matmul: torch::matmul's values and gradients for the layouts BERT's attention
// passes (head-split views, a transposed key), and when it steps aside.
#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include "core/precision/autocast.h"
#include "models/batched_matmul.h"
#include "tests/support/helpers.h"

using namespace mpt::models;
using mpt::testing::with_threads;

namespace {

// Runs `product` on fresh leaf copies of a and b and returns the result with both gradients for a fixed
// upstream gradient.
struct Outcome {
  torch::Tensor out, grad_a, grad_b;
};
template <typename Product>
Outcome run(const torch::Tensor& a_values, const torch::Tensor& b_values, const torch::Tensor& upstream,
            Product product) {
  torch::Tensor a = a_values.detach().clone().requires_grad_(true);
  torch::Tensor b = b_values.detach().clone().requires_grad_(true);
  torch::Tensor out = product(a, b);
  out.backward(upstream);
  return {out.detach(), a.grad(), b.grad()};
}

// Whether this build and process can split: mpt's loops on LibTorch's OpenMP pool and a CBLAS in the process (the
// GPU check's pip-wheel LibTorch keeps its BLAS private). Elsewhere the values are still checked, through ATen.
bool can_split() {
#ifdef _OPENMP
  if (dlsym(RTLD_DEFAULT, "cblas_sgemm")) return true;
  WARN("no cblas_sgemm in this process: batched_matmul always takes ATen's path");
#else
  WARN("built with MPT_OPENMP=OFF: batched_matmul always takes ATen's path");
#endif
  return false;
}

void check_close(const Outcome& got, const Outcome& want) {
  CHECK(got.out.sizes() == want.out.sizes());
  CHECK(torch::allclose(got.out, want.out, 1e-5, 1e-5));
  CHECK(torch::allclose(got.grad_a, want.grad_a, 1e-5, 1e-5));
  CHECK(torch::allclose(got.grad_b, want.grad_b, 1e-5, 1e-5));
}

}  // namespace

TEST_CASE("batched_matmul matches torch::matmul on BERT's attention layouts, forward and backward", "[fast][models]") {
  with_threads(2, [] {  // the split needs at least 2
    torch::manual_seed(3);
    const int64_t batch = 2, seq = 7, heads = 3, head_dim = 5;
    // Projections (B, S, H) split into heads: (B, h, S, d) views with strides (S*H, d, H, 1).
    const torch::Tensor projected_q = torch::randn({batch, seq, heads * head_dim});
    const torch::Tensor projected_k = torch::randn({batch, seq, heads * head_dim});
    auto split = [&](const torch::Tensor& t) { return t.view({batch, seq, heads, head_dim}).transpose(1, 2); };
    const torch::Tensor scores_grad = torch::randn({batch, heads, seq, seq});

    // Q K^T: the key transposed, so BLAS reads it column-major in place.
    auto scores = [&](auto product) {
      return run(projected_q, projected_k, scores_grad, [&](const torch::Tensor& q, const torch::Tensor& k) {
        return product(split(q), split(k).transpose(-2, -1));
      });
    };
    CHECK(splits_batched_matmul(split(projected_q), split(projected_k).transpose(-2, -1)) == can_split());
    check_close(scores(batched_matmul), scores([](const auto& a, const auto& b) { return torch::matmul(a, b); }));

    // probs V: contiguous probabilities times the head-split values.
    const torch::Tensor probs = torch::softmax(torch::randn({batch, heads, seq, seq}), -1);
    const torch::Tensor context_grad = torch::randn({batch, heads, seq, head_dim});
    auto context = [&](auto product) {
      return run(probs, projected_k, context_grad,
                 [&](const torch::Tensor& p, const torch::Tensor& v) { return product(p, split(v)); });
    };
    check_close(context(batched_matmul), context([](const auto& a, const auto& b) { return torch::matmul(a, b); }));

    // A layout with no unit stride in its last two dimensions goes through a copy; 3-D operands work alike.
    const torch::Tensor strided = torch::randn({4, 6, 10}).slice(2, 0, 10, 2);  // (4, 6, 5), column stride 2
    const torch::Tensor right = torch::randn({4, 5, 3});
    const torch::Tensor upstream = torch::randn({4, 6, 3});
    check_close(run(strided, right, upstream, batched_matmul),
                run(strided, right, upstream, [](const auto& a, const auto& b) { return torch::matmul(a, b); }));
    // Without gradients it returns the plain product.
    torch::NoGradGuard no_grad;
    CHECK(torch::allclose(batched_matmul(strided, right), torch::matmul(strided, right), 1e-5, 1e-5));
  });
}

TEST_CASE("batched_matmul leaves BF16, autocast, broadcasting and single products to ATen", "[fast][models]") {
  with_threads(2, [] {  // the split needs at least 2
    const torch::Tensor a = torch::randn({4, 3, 8, 5}), b = torch::randn({4, 3, 5, 6});
    CHECK(splits_batched_matmul(a, b) == can_split());
    CHECK_FALSE(splits_batched_matmul(a.to(torch::kBFloat16), b.to(torch::kBFloat16)));
    CHECK_FALSE(splits_batched_matmul(a, torch::randn({1, 3, 5, 6})));                     // broadcast batch
    CHECK_FALSE(splits_batched_matmul(a[0][0], b[0][0]));                                  // 2-D
    CHECK_FALSE(splits_batched_matmul(torch::randn({1, 8, 5}), torch::randn({1, 5, 6})));  // one product, 2 threads
    {
      mpt::precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
      CHECK_FALSE(splits_batched_matmul(a, b));  // autocast would run the product in BF16
    }
  });
}
