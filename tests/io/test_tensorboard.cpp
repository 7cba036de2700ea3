// TensorBoard event files: byte-exact against REFERENCE.md's vectors, and read back by an independent decoder.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "io/tensorboard.h"
#include "tests/support/helpers.h"

using namespace mpt::io;

namespace {

std::string hex(const std::string& bytes) {
  std::string out;
  char buffer[3];
  for (unsigned char c : bytes) std::snprintf(buffer, sizeof(buffer), "%02x", c), out += buffer;
  return out;
}

// An independent reader: walks the records, checks both CRCs with a bitwise CRC-32C, decodes scalar events.
struct Scalar {
  int64_t step;
  std::string tag;
  float value;
};

uint32_t bitwise_crc32c(const std::string& bytes) {
  uint32_t crc = ~0u;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return ~crc;
}

uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint64_t varint(const std::string& s, size_t& i) {
  uint64_t value = 0;
  for (int shift = 0;; shift += 7) {
    uint8_t b = static_cast<uint8_t>(s[i++]);
    value |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return value;
  }
}

std::vector<Scalar> decode_file(const std::string& bytes, std::string* file_version) {
  std::vector<Scalar> scalars;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t length;
    uint32_t length_crc, data_crc;
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&length_crc, bytes.data() + at + 8, 4);
    REQUIRE(length_crc == mask(bitwise_crc32c(bytes.substr(at, 8))));
    const std::string event = bytes.substr(at + 12, length);
    std::memcpy(&data_crc, bytes.data() + at + 12 + length, 4);
    REQUIRE(data_crc == mask(bitwise_crc32c(event)));
    at += 12 + length + 4;
    Scalar scalar{0, "", 0.0f};
    for (size_t i = 0; i < event.size();) {
      const uint8_t key = static_cast<uint8_t>(event[i++]);
      if (key == 0x09)
        i += 8;  // wall_time
      else if (key == 0x10)
        scalar.step = int64_t(varint(event, i));
      else if (key == 0x1A) {
        uint64_t n = varint(event, i);
        *file_version = event.substr(i, n), i += n;
      } else if (key == 0x2A) {  // summary { value { tag, simple_value } }
        varint(event, i);
        REQUIRE(event[i++] == 0x0A);
        varint(event, i);
        REQUIRE(event[i++] == 0x0A);
        uint64_t n = varint(event, i);
        scalar.tag = event.substr(i, n), i += n;
        REQUIRE(event[i++] == 0x15);
        std::memcpy(&scalar.value, event.data() + i, 4), i += 4;
        scalars.push_back(scalar);
      } else {
        FAIL("unexpected field key " << int(key));
      }
    }
  }
  return scalars;
}

}  // namespace

TEST_CASE("CRC-32C and its mask match the reference", "[fast][io]") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(bitwise_crc32c("123456789") == 0xE3069283u);
}

TEST_CASE("a scalar event and its record are byte-exact against the test vector", "[fast][io]") {
  const std::string event = encode_scalar_event(1.7e9, 3, "loss", 0.5f);
  CHECK(hex(event) ==
        "0900000040fc54d9411003"
        "2a0d0a0b0a046c6f737315"
        "0000003f");
  const std::string record = frame_record(event);
  CHECK(hex(record.substr(0, 12)) == "1a00000000000000129bd82d");
  CHECK(hex(record.substr(record.size() - 4)) == "35f132ef");
}

TEST_CASE("the writer's file reads back through an independent decoder", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("tensorboard");
  std::string path;
  {
    TensorBoardWriter writer(dir);
    path = writer.path();
    writer.scalar("train/loss", 1, 2.25);
    writer.scalar("eval/accuracy", 300, 0.875);
  }
  CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  std::string file_version;
  auto scalars = decode_file(mpt::testing::read_file_text(path), &file_version);
  CHECK(file_version == "brain.Event:2");
  REQUIRE(scalars.size() == 2);
  CHECK(scalars[0].tag == "train/loss");
  CHECK(scalars[0].step == 1);
  CHECK(scalars[0].value == 2.25f);
  CHECK(scalars[1].tag == "eval/accuracy");
  CHECK(scalars[1].step == 300);
  CHECK(scalars[1].value == 0.875f);
}
