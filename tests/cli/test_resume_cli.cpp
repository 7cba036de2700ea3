// Resuming from what a run directory holds when its content cannot be trusted, and what TensorBoard is told at
// every start.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/checkpoint.h"
#include "run/resolve.h"
#include "run/sections.h"
#include "run/stack.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;
namespace fs = std::filesystem;

namespace {

const std::string kFp8 = source_path("configs/mlp_fmnist_fp8.yaml");

// Rewrites `checkpoint` (of the spec `spec` with `overrides`) with one FP8 state tensor set to `value`, through
// mpt's own writer: a CRC-valid file, as a bug or a hand edit would leave it.
void set_fp8_tensor(const std::string& checkpoint, const std::vector<std::string>& overrides, const std::string& name,
                    float value) {
  mpt::config::Spec spec = mpt::run::load_resolved_spec(kFp8, overrides);
  mpt::run::ExperimentConfig c = mpt::run::read_sections(spec);
  mpt::run::TrainingStack stack = mpt::run::build_training_stack(c, mpt::data::sample_shape(c.data), 100, torch::kCPU);
  mpt::io::ModelTensors weights{stack.recipe->weights(), stack.model->named_buffers()};
  REQUIRE(stack.recipe->gemms());
  for (const auto& [key, tensor] : stack.recipe->state()) weights.buffers.insert(key, tensor);
  const mpt::io::TrainingState state = mpt::io::load_checkpoint(checkpoint, weights, *stack.optimizer);
  REQUIRE(weights.buffers.contains(name));
  weights.buffers[name].fill_(value);
  mpt::io::save_checkpoint(checkpoint, weights, *stack.optimizer, state);
}

// The steps at which an event file holds a SessionLog START (TensorBoard's purge marker).
std::vector<int> session_starts(const std::string& run_dir) {
  std::vector<int> steps;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    const std::string bytes = read_file_text(entry.path().string());
    for (size_t at = 0; at + 12 <= bytes.size();) {
      uint64_t length = 0;
      std::memcpy(&length, bytes.data() + at, 8);
      const std::string data = bytes.substr(at + 12, length);
      // Event{wall_time (0x09, 8 bytes), step (0x10, varint), session_log (0x3A) {status: START}}
      if (data.find(std::string("\x3a\x02\x08\x01", 4)) != std::string::npos && data.size() > 10 && data[9] == 0x10)
        steps.push_back(static_cast<unsigned char>(data[10]));
      at += 12 + length + 4;
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace

TEST_CASE(
    "a checkpoint whose FP8 state was tampered with is rejected naming the tensor, and the run resumes "
    "from the checkpoint before it, and named with --resume it is a usage error",
    "[slow][cli][fp8]") {
  const std::string dir = scratch_dir("fp8-tampered"), run = dir + "/run";
  const std::vector<std::string> overrides = {"train.max_steps=6", "checkpoint.every_steps=3",
                                              "train.log_every_steps=3", "data.train_limit=4096"};
  std::vector<std::string> first = {"train", kFp8};
  first.insert(first.end(), overrides.begin(), overrides.end());
  first.insert(first.end(), {"--run-dir", run});
  CommandResult trained = run_mpt(first);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  CHECK(session_starts(run) == std::vector<int>{1});  // a fresh run marks its start too
  const std::string newest = run + "/checkpoints/step-000000006.mpt";
  REQUIRE(fs::exists(newest));
  set_fp8_tensor(newest, overrides, "fp8.hidden.0.input.scale", std::nanf(""));
  CHECK(mpt::io::verify_checkpoint(newest) == "");  // the container still verifies
  fs::copy_file(newest, dir + "/tampered.mpt");

  CommandResult named =
      run_mpt({"train", kFp8, "train.max_steps=8", "checkpoint.every_steps=3", "train.log_every_steps=3",
               "data.train_limit=4096", "--run-dir", dir + "/other", "--resume", dir + "/tampered.mpt"});
  CHECK(named.exit_code == 2);
  CHECK_THAT(named.output,
             Catch::Contains("--resume " + dir + "/tampered.mpt: tensor 'fp8.hidden.0.input.scale' = nan"));

  std::vector<std::string> again = {"train",
                                    kFp8,
                                    "train.max_steps=8",
                                    "checkpoint.every_steps=3",
                                    "train.log_every_steps=3",
                                    "data.train_limit=4096",
                                    "--run-dir",
                                    run};
  CommandResult resumed = run_mpt(again);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const ResumeRecord record = resume_record(run, newest);
  CHECK_THAT(record.rejection, Catch::Contains("fp8.hidden.0.input.scale"));
  CHECK(record.resumed_at == 3);
  CHECK(read_json(run + "/summary.json")["steps"] == 8);
  CHECK(session_starts(run) == std::vector<int>({1, 4}));  // the restart replaces what the first run logged past 3
}
