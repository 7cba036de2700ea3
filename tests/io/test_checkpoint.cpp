// Checkpoints: complete round trip, corruption detection, newest-valid choice, pruning, atomic replacement.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

#include "common/error.h"
#include "common/files.h"
#include "io/checkpoint.h"
#include "tests/support/helpers.h"
#include "tests/support/legacy_checkpoint.h"

using namespace mpt::io;
using mpt::read_file;
using mpt::write_file_atomically;
using mpt::io::CheckpointReader;
using mpt::io::CheckpointWriter;

namespace {

struct Fixture {
  torch::nn::Sequential model{torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3)};
  torch::optim::Adam optimizer{model->parameters(), torch::optim::AdamOptions(0.1)};

  void train_once() {
    optimizer.zero_grad();
    model->forward(torch::randn({8, 4})).pow(2).mean().backward();
    optimizer.step();
  }
};

TrainingState some_state() {
  TrainingState state;
  state.step = 12;
  state.applied_steps = 11;
  state.skipped_steps = 1;
  state.data = {2, 5};
  state.scaler = {16384.0, 7, 1, 0, 16384.0, 2, 3};
  state.rng_state = at::detail::getDefaultCPUGenerator().get_state();
  return state;
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char c;
  file.get(c);
  file.seekp(offset);
  file.put(static_cast<char>(c ^ 0x10));
}

}  // namespace

TEST_CASE("a checkpoint restores weights, buffers, optimizer and training state", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-roundtrip");
  Fixture a;
  a.train_once();
  save_checkpoint(dir + "/a.mpt", tensors_of(*a.model), a.optimizer, some_state());

  Fixture b;
  TrainingState state = load_checkpoint(dir + "/a.mpt", tensors_of(*b.model), b.optimizer);
  CHECK(state.step == 12);
  CHECK(state.applied_steps == 11);
  CHECK(state.data.epoch == 2);
  CHECK(state.data.batch == 5);
  CHECK(state.scaler.scale == 16384.0);
  CHECK(state.scaler.growth_tracker == 7);
  CHECK(state.scaler.hysteresis_left == 2);
  CHECK(state.scaler.overflows_at_min == 3);
  for (size_t i = 0; i < a.model->parameters().size(); ++i)
    CHECK(a.model->parameters()[i].equal(b.model->parameters()[i]));
  for (size_t i = 0; i < a.model->buffers().size(); ++i) CHECK(a.model->buffers()[i].equal(b.model->buffers()[i]));
  // Same optimizer state: one more identical step keeps the models identical.
  torch::manual_seed(1);
  a.train_once();
  torch::manual_seed(1);
  b.train_once();
  for (size_t i = 0; i < a.model->parameters().size(); ++i)
    CHECK(a.model->parameters()[i].equal(b.model->parameters()[i]));
}

TEST_CASE("truncated and bit-flipped checkpoints are detected with the offset", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-corrupt");
  Fixture f;
  save_checkpoint(dir + "/good.mpt", tensors_of(*f.model), f.optimizer, some_state());
  CHECK(verify_checkpoint(dir + "/good.mpt").empty());
  const auto size = std::filesystem::file_size(dir + "/good.mpt");

  std::filesystem::copy_file(dir + "/good.mpt", dir + "/cut.mpt");
  std::filesystem::resize_file(dir + "/cut.mpt", size - 100);
  CHECK_THAT(verify_checkpoint(dir + "/cut.mpt"),
             Catch::Contains("byte " + std::to_string(size - 124) + ": missing the completion trailer"));

  std::filesystem::copy_file(dir + "/good.mpt", dir + "/flipped.mpt");
  flip_byte(dir + "/flipped.mpt", size - 25);  // the last byte of the last record's data (the RNG state)
  CHECK_THAT(verify_checkpoint(dir + "/flipped.mpt"), Catch::Contains("CRC-32 mismatch"));
  Fixture g;
  CHECK_THROWS_WITH(load_checkpoint(dir + "/flipped.mpt", tensors_of(*g.model), g.optimizer),
                    Catch::Contains("flipped.mpt"));

  std::ofstream(dir + "/text.mpt") << "hello, this is not a checkpoint at all, just words";
  CHECK_THAT(verify_checkpoint(dir + "/text.mpt"), Catch::Contains("byte 0: not an mpt checkpoint"));
}

TEST_CASE("loading into a different model names the mismatching tensor", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-shape");
  Fixture f;
  save_checkpoint(dir + "/a.mpt", tensors_of(*f.model), f.optimizer, some_state());
  torch::nn::Sequential other{torch::nn::Linear(5, 3), torch::nn::BatchNorm1d(3)};
  torch::optim::Adam optimizer(other->parameters(), torch::optim::AdamOptions(0.1));
  CHECK_THROWS_WITH(load_checkpoint(dir + "/a.mpt", tensors_of(*other), optimizer),
                    Catch::Contains("tensor '0.weight' has shape [3, 4], the model expects [3, 5]"));
}

TEST_CASE("the store prunes to keep_last and resumes from the newest valid file", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-store");
  Fixture f;
  CheckpointStore store(dir, 2);
  TrainingState state = some_state();
  for (int64_t step : {10, 20, 30}) {
    state.step = step;
    store.save(tensors_of(*f.model), f.optimizer, state);
  }
  CHECK_FALSE(std::filesystem::exists(store.path_for(10)));
  CHECK(std::filesystem::exists(store.path_for(20)));
  std::filesystem::resize_file(store.path_for(30), 64);  // a torn newest file
  std::vector<std::string> rejected;
  auto latest = store.latest_valid([&](const std::string& path, const std::string&) { rejected.push_back(path); });
  REQUIRE(latest);
  CHECK(*latest == store.path_for(20));
  CHECK(rejected == std::vector<std::string>{store.path_for(30)});
}

TEST_CASE("a failed atomic write leaves the previous file intact", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("atomic");
  write_file_atomically(dir + "/f.json", "old");
  std::filesystem::create_directory(dir + "/f.json.tmp." + std::to_string(::getpid()));  // the temp path is taken
  CHECK_THROWS_WITH(write_file_atomically(dir + "/f.json", "new"), Catch::Contains("f.json: cannot create"));
  CHECK(read_file(dir + "/f.json") == "old");
}

TEST_CASE("a checkpoint whose content cannot be trusted is refused before anything is loaded", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-content");
  Fixture a;
  a.train_once();
  for (double bad_scale : {std::nan(""), 1e40, 0.0, -1.0}) {
    TrainingState state = some_state();
    state.scaler.scale = bad_scale;
    save_checkpoint(dir + "/bad.mpt", tensors_of(*a.model), a.optimizer, state);
    Fixture b;
    const torch::Tensor before = b.model->parameters()[0].clone();
    INFO(bad_scale);
    CHECK(verify_checkpoint(dir + "/bad.mpt") == "");  // the container is sound: CRC and all
    try {
      load_checkpoint(dir + "/bad.mpt", tensors_of(*b.model), b.optimizer);
      FAIL("a non-finite or out-of-range loss scale was accepted");
    } catch (const RejectedCheckpoint& e) {
      CHECK_THAT(e.what(), Catch::Contains(dir + "/bad.mpt: scaler.scale = "));
      CHECK_THAT(e.why(), Catch::Contains("FP32's positive finite range"));
    }
    CHECK(torch::equal(b.model->parameters()[0], before));
  }
  TrainingState uneven = some_state();
  uneven.skipped_steps = 5;  // applied 11 + skipped 5 != step 12
  save_checkpoint(dir + "/uneven.mpt", tensors_of(*a.model), a.optimizer, uneven);
  Fixture c;
  CHECK_THROWS_AS(load_checkpoint(dir + "/uneven.mpt", tensors_of(*c.model), c.optimizer), RejectedCheckpoint);

  // A content check (given the buffers, where a recipe keeps its state) refuses by tensor name; nothing is copied.
  save_checkpoint(dir + "/good.mpt", tensors_of(*a.model), a.optimizer, some_state());
  Fixture d;
  const torch::Tensor before = d.model->parameters()[0].clone();
  const std::string why = mpt::testing::error_of([&] {
    load_checkpoint(dir + "/good.mpt", tensors_of(*d.model), d.optimizer, [](const auto& saved) {
      return saved.contains("1.running_var") ? std::string("tensor '1.running_var' refused") : std::string();
    });
  });
  CHECK_THAT(why, Catch::Contains("good.mpt: tensor '1.running_var' refused"));
  CHECK(torch::equal(d.model->parameters()[0], before));
  CHECK_NOTHROW(load_checkpoint(dir + "/good.mpt", tensors_of(*d.model), d.optimizer));
}

TEST_CASE("a checkpoint holding non-finite weights, buffers or optimizer state is refused, naming the tensor",
          "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-nonfinite");
  const auto refusal = [&](const std::function<void(Fixture&)>& doctor) {
    Fixture a;
    a.train_once();
    doctor(a);
    save_checkpoint(dir + "/doctored.mpt", tensors_of(*a.model), a.optimizer, some_state());
    CHECK(verify_checkpoint(dir + "/doctored.mpt") == "");  // CRC-valid: only the content is wrong
    Fixture b;
    const torch::Tensor before = b.model->parameters()[0].clone();
    std::string why = "(accepted)";
    try {
      load_checkpoint(dir + "/doctored.mpt", tensors_of(*b.model), b.optimizer);
    } catch (const RejectedCheckpoint& e) {
      why = e.why();
    }
    CHECK(torch::equal(b.model->parameters()[0], before));  // nothing loaded
    CHECK(b.optimizer.state().empty());
    return why;
  };
  CHECK(refusal([](Fixture& f) {
          torch::NoGradGuard no_grad;
          f.model->parameters()[0][1][2] = std::nanf("");
        }) == "tensor '0.weight' holds 1 non-finite value (NaN or Inf) of 12");
  CHECK(refusal([](Fixture& f) { f.model->named_buffers()["1.running_var"].fill_(INFINITY); }) ==
        "tensor '1.running_var' holds 3 non-finite values (NaN or Inf) of 3");
  auto adam = [](Fixture& f, size_t parameter) -> torch::optim::AdamParamState& {
    return static_cast<torch::optim::AdamParamState&>(
        *f.optimizer.state().at(f.model->parameters()[parameter].unsafeGetTensorImpl()));
  };
  CHECK(refusal([&](Fixture& f) { adam(f, 1).exp_avg().fill_(std::nanf("")); }) ==
        "tensor 'optimizer.exp_avg of 0.bias' holds 3 non-finite values (NaN or Inf) of 3");
  CHECK(refusal([&](Fixture& f) { adam(f, 2).exp_avg_sq()[0] = -1.0f; }) ==
        "tensor 'optimizer.exp_avg_sq of 1.weight' holds 1 negative value (a second moment is never negative)");
}

TEST_CASE("a checkpoint carries the logging state beside the training state", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-logging");
  Fixture a;
  TrainingState state = some_state();
  state.logging.insert("metrics.window", torch::tensor({1.5, 2.0, 3.0}, torch::kDouble));
  save_checkpoint(dir + "/a.mpt", tensors_of(*a.model), a.optimizer, state);
  Fixture b;
  const TrainingState loaded = load_checkpoint(dir + "/a.mpt", tensors_of(*b.model), b.optimizer);
  REQUIRE(loaded.logging.contains("metrics.window"));
  CHECK(torch::equal(loaded.logging["metrics.window"], state.logging["metrics.window"]));
  // Written without it (as before the logging section): nothing, and the run resumes with fresh windows.
  save_checkpoint(dir + "/b.mpt", tensors_of(*a.model), a.optimizer, some_state());
  CHECK(load_checkpoint(dir + "/b.mpt", tensors_of(*b.model), b.optimizer).logging.is_empty());
}

TEST_CASE("a checkpoint of the first format still verifies, loads and exports", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-first-format");
  Fixture a;
  a.train_once();
  TrainingState state = some_state();
  state.logging.insert("metrics.window", torch::tensor({1.0, 2.0}, torch::kDouble));
  mpt::testing::save_first_format_checkpoint(dir + "/old.mpt", tensors_of(*a.model), a.optimizer, state);
  CHECK(checkpoint_version(dir + "/old.mpt") == 1u);
  CHECK(verify_checkpoint(dir + "/old.mpt") == "");
  Fixture b;
  const TrainingState loaded = load_checkpoint(dir + "/old.mpt", tensors_of(*b.model), b.optimizer);
  CHECK(loaded.step == 12);
  CHECK(loaded.logging.contains("metrics.window"));
  for (size_t i = 0; i < a.model->parameters().size(); ++i)
    CHECK(a.model->parameters()[i].equal(b.model->parameters()[i]));
  CHECK(read_checkpoint_weights(dir + "/old.mpt").size() == a.model->parameters().size() + a.model->buffers().size());
  // Saved again, it is the streamed format, and the same state.
  save_checkpoint(dir + "/new.mpt", tensors_of(*b.model), b.optimizer, loaded);
  CHECK(checkpoint_version(dir + "/new.mpt") == kStreamVersion);
  torch::manual_seed(3);
  a.train_once();
  Fixture c;
  load_checkpoint(dir + "/new.mpt", tensors_of(*c.model), c.optimizer);
  torch::manual_seed(3);
  c.train_once();
  for (size_t i = 0; i < a.model->parameters().size(); ++i)
    CHECK(a.model->parameters()[i].equal(c.model->parameters()[i]));
}

TEST_CASE("the streamed container keeps every record kind, and refuses a record that declares more than it holds",
          "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("ckpt-stream");
  const torch::Tensor channels_last = torch::randn({2, 3, 4, 5}).contiguous(torch::MemoryFormat::ChannelsLast);
  CommittedFile committed;
  {
    CheckpointWriter writer(dir + "/records.mpt");
    writer.tensor("weights", channels_last);
    writer.tensor("bf16", torch::ones({7}, torch::kBFloat16));
    writer.integer("count", -5);
    writer.real("scale", 0.125);
    writer.text("note", "hello");
    writer.pieces("sharded", torch::kFloat, {2, 3}, {1, 2});
    CHECK(!std::filesystem::exists(dir + "/records.mpt"));  // only the temporary file until commit
    committed = writer.commit();
  }
  CHECK(committed.bytes == std::filesystem::file_size(dir + "/records.mpt"));
  CommittedFile verified;
  CHECK(verify_stream(dir + "/records.mpt", &verified) == "");
  CHECK(verified.crc == committed.crc);
  CheckpointReader reader(dir + "/records.mpt");
  Record record;
  REQUIRE(reader.next(record));
  CHECK(torch::equal(reader.read_tensor(), channels_last));  // the logical order, whatever the layout
  REQUIRE(reader.next(record));
  const torch::Tensor into = torch::empty({7}, torch::kBFloat16);
  reader.read_into(into);
  CHECK(into.equal(torch::ones({7}, torch::kBFloat16)));
  REQUIRE(reader.next(record));
  CHECK(record.integer == -5);
  REQUIRE(reader.next(record));
  CHECK(record.real == 0.125);
  REQUIRE(reader.next(record));
  CHECK(reader.read_text() == "hello");
  REQUIRE(reader.next(record));
  CHECK(record.kind == RecordKind::kPieces);
  CHECK(record.strides == std::vector<int64_t>{1, 2});
  CHECK_FALSE(reader.next(record));

  // A kill before the rename leaves nothing; a writer destroyed without commit removes its temporary file.
  { CheckpointWriter abandoned(dir + "/abandoned.mpt"); }
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);

  // The first tensor's shape doubled in place: it now declares more elements than its bytes, CRC or not.
  std::string bytes = mpt::read_file(dir + "/records.mpt");
  const size_t first_size = 16 + 4 + std::string("weights").size() + 1 + 2;
  int64_t doubled = 4;
  std::memcpy(bytes.data() + first_size, &doubled, 8);
  mpt::write_file_atomically(dir + "/declares.mpt", bytes);
  CHECK_THAT(verify_checkpoint(dir + "/declares.mpt"),
             Catch::Contains("byte 16: tensor 'weights' declares 480 bytes for 240 elements"));
}
