// IDX reading: the real Fashion-MNIST headers, and clear errors for every kind of broken file.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <fstream>

#include "common/error.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "tests/support/helpers.h"

using namespace mpt::data;

namespace {

std::vector<uint8_t> idx_bytes(std::vector<uint32_t> dims, size_t values) {
  std::vector<uint8_t> bytes = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(d >> shift));
  for (size_t i = 0; i < values; ++i) bytes.push_back(static_cast<uint8_t>(i % 10));
  return bytes;
}

std::string message_of(const std::vector<uint8_t>& bytes, int rank) {
  try {
    parse_idx(bytes, "f.idx", rank);
  } catch (const mpt::Error& e) {
    return e.what();
  }
  FAIL("expected an error");
  return "";
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(file);
}

}  // namespace

TEST_CASE("the real Fashion-MNIST files have the published shapes", "[fast][data]") {
  const std::string root = mpt::testing::kFashionMnistRoot;
  IdxArray labels = read_idx(find_idx_file(root, "t10k-labels-idx1-ubyte"), 1);
  CHECK(labels.dims == std::vector<int64_t>{10000});
  DataConfig config;
  config.root = root;
  Dataset train = load_fashion_mnist(config, "train", 0);
  CHECK(train.images.sizes() == torch::IntArrayRef({60000, 1, 28, 28}));
  CHECK(train.labels.max().item<int64_t>() == 9);
  CHECK(train.labels.bincount().eq(6000).all().item<bool>());  // balanced: 6,000 per class
  CHECK(load_fashion_mnist(config, "t10k", 100).size() == 100);
}

TEST_CASE("well-formed IDX bytes parse", "[fast][data]") {
  IdxArray array = parse_idx(idx_bytes({2, 3}, 6), "f.idx", 2);
  CHECK(array.dims == std::vector<int64_t>{2, 3});
  CHECK(array.values.size() == 6);
}

TEST_CASE("broken IDX bytes give the byte offset and what was expected", "[fast][data]") {
  CHECK_THAT(message_of({0x1f, 0x8b, 8, 0}, 3),
             Catch::Contains("f.idx: byte 0: expected IDX magic 00 00 08 03") && Catch::Contains("found 1f 8b 08 00"));
  CHECK_THAT(message_of(idx_bytes({2, 3}, 6), 3), Catch::Contains("byte 0: expected IDX magic 00 00 08 03"));
  CHECK_THAT(message_of(idx_bytes({2, 3}, 5), 2),
             Catch::Contains("promises 6 values") && Catch::Contains("(truncated)"));
  CHECK_THAT(message_of(idx_bytes({2, 3}, 7), 2), Catch::Contains("(trailing bytes)"));
  CHECK_THAT(message_of({0, 0, 8, 2, 0, 0}, 2), Catch::Contains("truncated header"));
  CHECK_THAT(message_of({0, 0}, 1), Catch::Contains("only 2 bytes"));
}

TEST_CASE("a truncated gzip file is an error, not a short dataset", "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("idx-gzip");
  std::vector<uint8_t> bytes = idx_bytes({1000, 28, 28}, 1000 * 28 * 28);
  write_gzip(dir + "/whole.gz", bytes);
  CHECK(read_idx(dir + "/whole.gz", 3).dims[0] == 1000);

  std::ifstream in(dir + "/whole.gz", std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir + "/cut.gz", std::ios::binary).write(gz.data(), gz.size() / 2);
  CHECK_THROWS_WITH(read_idx(dir + "/cut.gz", 3), Catch::Contains("cut.gz: corrupt or truncated gzip stream"));
  CHECK_THROWS_WITH(read_idx(dir + "/absent.gz", 3), Catch::Contains("absent.gz: cannot open"));
}

TEST_CASE("labels outside the class range are rejected with their offset", "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("idx-labels");
  write_gzip(dir + "/t10k-images-idx3-ubyte.gz", idx_bytes({3, 28, 28}, 3 * 28 * 28));
  write_gzip(dir + "/t10k-labels-idx1-ubyte.gz", {0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 12});
  DataConfig config;
  config.root = dir;
  CHECK_THROWS_WITH(load_fashion_mnist(config, "t10k", 0), Catch::Contains("label 12 at data byte 10"));
}
