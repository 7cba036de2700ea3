// edit_distance: the textbook values, and the limited form agreeing with the full one wherever it is below the limit.
#include <catch2/catch.hpp>

#include <random>

#include "common/edit_distance.h"

TEST_CASE("edit distance: known values, and a limit that only cuts the search short", "[fast][common]") {
  using mpt::edit_distance;
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("optimizer.lr", "optimizer.lr") == 0);
  CHECK(edit_distance("flaw", "lawn") == 2);

  std::mt19937 rng(7);
  auto random_word = [&] {
    std::string word(rng() % 12, ' ');
    for (char& c : word) c = static_cast<char>('a' + rng() % 4);  // a small alphabet: many near neighbours
    return word;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const std::string a = random_word(), b = random_word();
    const size_t full = edit_distance(a, b), limit = rng() % 8;
    INFO(a << " / " << b << " limit " << limit);
    CHECK(edit_distance(a, b, limit) == std::min(full, limit));
  }
}
