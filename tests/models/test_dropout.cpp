// mpt's counter-based CPU dropout: the right statistics, reproducible from torch's seed, and its gradient.
#include <catch2/catch.hpp>

#include "models/dropout.h"

TEST_CASE("dropout keeps 1 - p of the elements, scaled, reproducibly, with the matching gradient", "[fast][models]") {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::manual_seed(3);
    const torch::Tensor x = torch::ones({1000, 1000}, dtype);
    const torch::Tensor y = mpt::models::dropout(x, 0.1, /*training=*/true);
    const torch::Tensor kept = y.ne(0);
    CHECK(kept.to(torch::kDouble).mean().item<double>() == Approx(0.9).margin(0.002));  // 1e6 draws: sd 3e-4
    CHECK(y.masked_select(kept).to(torch::kFloat).eq(static_cast<float>(torch::tensor(1.0 / 0.9, dtype).item<float>()))
              .all().item<bool>());
    // Rows and columns are not correlated (a per-row or per-column pattern would show here).
    const torch::Tensor row_rate = kept.to(torch::kDouble).mean(1), column_rate = kept.to(torch::kDouble).mean(0);
    CHECK(row_rate.std().item<double>() < 0.02);
    CHECK(column_rate.std().item<double>() < 0.02);

    torch::manual_seed(3);
    CHECK(torch::equal(mpt::models::dropout(x, 0.1, true), y));  // the same seed, the same mask
    CHECK_FALSE(torch::equal(mpt::models::dropout(x, 0.1, true), y));  // the next call draws a new one
  }
  const torch::Tensor x = torch::randn({64, 32}).requires_grad_();
  const torch::Tensor y = mpt::models::dropout(x, 0.5, true);
  y.sum().backward();
  CHECK(torch::allclose(x.grad(), (y.detach() / x.detach()).nan_to_num(0.0), 1e-5, 1e-6));  // grad = mask * 2
  CHECK(torch::equal(mpt::models::dropout(x, 0.5, /*training=*/false), x));
}
