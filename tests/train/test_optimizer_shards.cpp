// ZeRO-1's partition: every element of every parameter in exactly one piece, N equal ranges whatever the tensor
// sizes, and the state each rank keeps.
#include <catch2/catch.hpp>

#include "train/optimizer_shards.h"

using namespace mpt;

TEST_CASE("the partition cuts the parameters' elements into equal contiguous ranges, each element in one piece",
          "[fast][train][memory]") {
  const std::vector<int64_t> numels = {784 * 4096, 4096, 4096 * 4096, 4096, 4096 * 10, 10, 7};
  for (int ranks : {1, 2, 3, 8}) {
    INFO(ranks << " ranks");
    const std::vector<train::Piece> pieces = train::partition(numels, ranks);
    std::vector<int64_t> covered(numels.size(), 0), per_rank(ranks, 0);
    int last_owner = 0;
    for (const auto& piece : pieces) {
      CHECK(piece.start == covered[piece.pair]);  // in order, no gap, no overlap
      covered[piece.pair] += piece.length;
      per_rank[piece.owner] += piece.length;
      CHECK(piece.owner >= last_owner);  // rank r's range follows rank r-1's
      last_owner = piece.owner;
    }
    CHECK(covered == numels);
    int64_t total = 0;
    for (int64_t n : numels) total += n;
    for (int64_t count : per_rank) CHECK(std::abs(count - total / ranks) <= train::kPieceAlignment);
    for (const auto& piece : pieces)  // a piece starts on the alignment of its parameter, or at its start
      CHECK(piece.start % train::kPieceAlignment == 0);
  }
}

TEST_CASE("sharding halves the masters and the optimizer state per rank on 2 ranks, even with one dominant matrix",
          "[fast][train][memory]") {
  std::vector<precision::MasterPair> pairs;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{4096, 784}, {4096}, {4096, 4096}, {4096}, {10, 4096}})
    pairs.push_back({torch::zeros(shape, torch::kBFloat16), torch::zeros(shape), /*shared=*/false});
  pairs.push_back({torch::zeros({10}), torch::zeros({10}), /*shared=*/true});  // an FP32 island: its own master
  const auto whole = train::state_per_rank(pairs, "adamw", 0.0, 2, /*sharded=*/false);
  const auto sharded = train::state_per_rank(pairs, "adamw", 0.0, 2, /*sharded=*/true);
  REQUIRE(sharded.size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(sharded[rank].weights == whole[rank].weights);
    CHECK(sharded[rank].gradients == whole[rank].gradients);
    CHECK(sharded[rank].optimizer_state == Approx(whole[rank].optimizer_state / 2.0).epsilon(1e-6));
    CHECK(sharded[rank].masters == Approx(whole[rank].masters / 2.0).epsilon(1e-5));
  }
  CHECK(train::state_per_rank(pairs, "sgd", 0.0, 2, true)[0].optimizer_state == 0);
}
