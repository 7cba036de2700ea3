// The linear layer with a thread-split backward: LibTorch's values and gradients, and its own path only where
// it is meant to run.
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include "ops/linear.h"
#include "precision/autocast.h"
#include "tests/support/helpers.h"

namespace {

using mpt::testing::with_threads;

// The split needs mpt's loops on LibTorch's OpenMP pool; a build with MPT_OPENMP=OFF keeps LibTorch's path.
bool built_with_openmp() {
#ifdef _OPENMP
  return true;
#else
  WARN("built with MPT_OPENMP=OFF: linear always takes LibTorch's path");
  return false;
#endif
}

}  // namespace

TEST_CASE("linear's split backward gives LibTorch's values and gradients", "[fast][models]") {
  if (!built_with_openmp()) return;
  with_threads(2, [] {
    struct Shape {
      int64_t batch, in, out;
      bool bias, input_grad;
    };
    // The MLP's layers (the input needs no gradient; the head's input does), a batch that does not divide into
    // 16-row shares, an output narrower than one share, and no bias.
    for (const Shape shape : {Shape{128, 784, 512, true, false}, Shape{128, 512, 10, true, true},
                              Shape{37, 33, 70, true, true}, Shape{64, 48, 5, false, true}}) {
      INFO("batch " << shape.batch << ", " << shape.in << " -> " << shape.out);
      torch::manual_seed(11);
      const torch::Tensor x = torch::randn({shape.batch, shape.in}).requires_grad_(shape.input_grad);
      const torch::Tensor weight = (torch::randn({shape.out, shape.in}) / 8).requires_grad_();
      const torch::Tensor bias = shape.bias ? torch::randn({shape.out}).requires_grad_() : torch::Tensor();
      const torch::Tensor upstream = torch::randn({shape.batch, shape.out});

      // Each path's gradients, by backward(): x.grad, weight.grad, bias.grad.
      const std::vector<torch::Tensor> leaves{x, weight, bias};
      const auto gradients_of = [&](const torch::Tensor& out) {
        out.backward(upstream);
        std::vector<torch::Tensor> grads;
        for (torch::Tensor leaf : leaves) {
          grads.push_back(leaf.defined() && leaf.grad().defined() ? leaf.grad().clone() : torch::Tensor());
          if (leaf.defined()) leaf.mutable_grad() = torch::Tensor();
        }
        return grads;
      };
      REQUIRE(mpt::ops::splits_linear_backward(x, weight));
      const torch::Tensor y = mpt::ops::linear(x, weight, bias);
      CHECK_THAT(y.grad_fn()->name(), Catch::Contains("SplitLinear"));
      const auto grads = gradients_of(y);
      const torch::Tensor expected = torch::nn::functional::linear(x, weight, bias);
      const auto expected_grads = gradients_of(expected);

      CHECK(torch::allclose(y, expected, 1e-5, 1e-5));
      CHECK(grads[0].defined() == shape.input_grad);
      for (size_t i = 0; i < grads.size(); ++i) {
        INFO("gradient " << i);
        REQUIRE(grads[i].defined() == expected_grads[i].defined());
        if (grads[i].defined()) CHECK(torch::allclose(grads[i], expected_grads[i], 1e-4, 1e-4));
      }
    }
  });
}

TEST_CASE("linear keeps LibTorch's path under autocast, for large or 3-D inputs, and on one thread", "[fast][models]") {
  const torch::Tensor x = torch::randn({128, 784}), weight = torch::randn({512, 784}).requires_grad_();
  const torch::Tensor bias = torch::randn({512});
  with_threads(2, [&] {
    CHECK(mpt::ops::splits_linear_backward(x, weight) == built_with_openmp());
    CHECK_FALSE(mpt::ops::splits_linear_backward(x.unsqueeze(0), weight));  // (1, B, D)
    CHECK_FALSE(mpt::ops::splits_linear_backward(x.to(torch::kDouble), weight.to(torch::kDouble)));
    // 1024 x 512 x 512 = 2^28 multiply-adds: the threaded BLAS call is as fast there.
    CHECK_FALSE(mpt::ops::splits_linear_backward(torch::randn({1024, 512}), torch::randn({512, 512})));
    {
      const mpt::precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
      CHECK_FALSE(mpt::ops::splits_linear_backward(x, weight));
      const torch::Tensor y = mpt::ops::linear(x, weight, bias);
      CHECK(y.scalar_type() == torch::kBFloat16);  // autocast cast it, as for torch::nn::Linear
    }
    {
      const torch::NoGradGuard no_grad;
      CHECK_FALSE(mpt::ops::splits_linear_backward(x, weight));
    }
  });
  with_threads(1, [&] { CHECK_FALSE(mpt::ops::splits_linear_backward(x, weight)); });
}
