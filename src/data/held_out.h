// How the text corpora split: every test_every-th packed row is held out, so both splits sample every file.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "data/dataset.h"

namespace mpt::data {

// The rows of `rows_packed` (packed `what`s: "sequences", "windows") that form `split`, the first `limit` of them
// when limit > 0; an error naming data.root when the split would be empty.
inline torch::Tensor split_rows(const torch::Tensor& rows_packed, const DataConfig& config, const std::string& split,
                                int64_t limit, const std::string& what) {
  const int64_t count = rows_packed.size(0);
  if (config.test_every < 2) throw UsageError("data.test_every must be at least 2");
  const torch::Tensor is_test = torch::arange(count).remainder(config.test_every).eq(config.test_every - 1);
  torch::Tensor rows = (split == "test" ? is_test : is_test.logical_not()).nonzero().squeeze(1);
  if (limit > 0) rows = rows.narrow(0, 0, std::min(limit, rows.size(0)));
  if (rows.size(0) == 0)
    throw Error(config.root + ": the corpus packs into only " + std::to_string(count) + " " + what + " of " +
                std::to_string(config.seq_len) + " tokens, none for the " + split +
                " split; use more text or a shorter data.seq_len");
  return rows_packed.index_select(0, rows);
}

}  // namespace mpt::data
