// The newest surfaces tried as a hostile or careless user would: credentials in a tracking URI, a resume off the
// logging grid, doctored checkpoints, keys that do nothing, a run of NaN losses, huge echoes, an alias bomb.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "io/checkpoint.h"
#include "run/resolve.h"
#include "run/sections.h"
#include "run/stack.h"
#include "tests/support/alias_bomb.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;
namespace fs = std::filesystem;

namespace {

const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");
const std::vector<std::string> kQuick = {"data.train_limit=2048", "data.test_limit=200", "train.progress=plain"};

std::vector<std::string> train_args(const std::string& run_dir, std::vector<std::string> overrides) {
  std::vector<std::string> args = {"train", kMixed};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), {"--run-dir", run_dir});
  return args;
}

// Rewrites `checkpoint` of kMixed (with `overrides`) through mpt's own writer after `doctor` changed its tensors: a
// CRC-valid file, as a bug, a bad disk or a hand edit would leave it.
void doctor_checkpoint(const std::string& checkpoint, const std::vector<std::string>& overrides,
                       const std::function<void(mpt::io::ModelTensors&)>& doctor) {
  std::vector<std::string> all = kQuick;
  all.insert(all.end(), overrides.begin(), overrides.end());
  mpt::run::ExperimentConfig c = mpt::run::read_sections(mpt::run::load_resolved_spec(kMixed, all));
  mpt::run::TrainingStack stack = mpt::run::build_training_stack(c, mpt::data::sample_shape(c.data), 100, torch::kCPU);
  mpt::io::ModelTensors weights{stack.recipe->weights(), stack.model->named_buffers()};
  const mpt::io::TrainingState state = mpt::io::load_checkpoint(checkpoint, weights, *stack.optimizer);
  torch::NoGradGuard no_grad;
  doctor(weights);
  mpt::io::save_checkpoint(checkpoint, weights, *stack.optimizer, state);
}

// metrics.jsonl's records without what depends on the wall clock.
std::vector<nlohmann::json> timeless(const std::string& path) {
  std::vector<nlohmann::json> records = read_jsonl(path);
  for (auto& record : records) record.erase("time"), record.erase("samples_per_sec");
  return records;
}

}  // namespace

TEST_CASE("credentials in a tracking URI reach no message, log or config.yaml, and the spool entry is the owner's",
          "[fast][cli][mlflow]") {
  const std::string dir = scratch_dir("hardening-credentials");
  const CommandResult run =
      run_mpt(train_args(dir + "/run", {"train.max_steps=2", "tracking.mlflow.uri=http://alice:S3cret@127.0.0.1:9",
                                        "tracking.mlflow.spool=" + dir + "/spool"}));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("http://***@127.0.0.1:9 is not answering"));
  CHECK(run.output.find("S3cret") == std::string::npos);
  for (const char* file : {"train.log", "config.yaml", "events.jsonl", "metrics.jsonl", "summary.json"})
    CHECK(read_file_text(dir + "/run/" + file).find("S3cret") == std::string::npos);
  const auto entry = fs::directory_iterator(dir + "/spool")->path();
  CHECK((fs::status(entry).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  // An escape sequence in MLflow's variable is refused before the run, and reaches the terminal escaped.
  const CommandResult hostile =
      run_mpt_with_env("MLFLOW_TRACKING_URI=\"$(printf 'http://x\\033]0;owned\\007')\"", train_args(dir + "/run2", {}));
  CHECK(hostile.exit_code == 2);
  CHECK(hostile.output.find('\x1b') == std::string::npos);
  CHECK_THAT(hostile.output, Catch::Contains("MLFLOW_TRACKING_URI 'http://x\\x1b]0;owned\\x07': byte 8 is the "
                                             "control character \\x1b"));
  CHECK(!fs::exists(dir + "/run2"));
}

TEST_CASE("keys that do nothing under the other keys, and URIs that can never work, are refused before the run",
          "[fast][cli]") {
  const std::string dir = scratch_dir("hardening-inert");
  for (const auto& [override, expected] : std::vector<std::pair<std::string, std::string>>{
           {"precision.fp8.recipe=mxfp8",
            "precision.fp8.recipe = mxfp8 does nothing here: it applies when "
            "precision.mode is fp8, and precision.mode is mixed_"},
           {"tracking.mlflow.tags=[team=vision]", "tracking.mlflow.tags is set, but no tracking server is"},
           {"tracking.mlflow.uri=http://", "tracking.mlflow.uri 'http://': no host after the scheme"},
           {"tracking.mlflow.uri=\"http://a\nb:5000\"", "byte 8 is a space"}}) {  // YAML folds the newline
    INFO(override);
    const CommandResult run = run_mpt_with_env("-u MLFLOW_TRACKING_URI", train_args(dir + "/run", {override}));
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, Catch::Contains(expected));
  }
  CHECK(!fs::exists(dir + "/run"));
}

TEST_CASE("a run that skips most of its steps on NaN losses ends diverged with exit 1, whatever the precision",
          "[fast][cli]") {
  const std::string dir = scratch_dir("hardening-nan-run");
  for (const char* mode : {"fp32", "mixed_bf16"}) {
    INFO(mode);
    const std::string run_dir = dir + "/" + mode;
    const CommandResult run = run_mpt(
        train_args(run_dir, {"train.max_steps=20", "optimizer.lr=1e30", std::string("precision.mode=") + mode}));
    INFO(run.output);
    CHECK(run.exit_code == 1);
    const nlohmann::json summary = read_json(run_dir + "/summary.json");
    CHECK(summary["status"] == "diverged");
    CHECK_THAT(summary["diagnosis"].get<std::string>(), Catch::Contains("of the 20 steps taken were skipped"));
  }
}

TEST_CASE("a huge tracking value is echoed once, cut short, and never widens every row of the log", "[fast][cli]") {
  const std::string dir = scratch_dir("hardening-echo");
  std::string tags = "tracking.mlflow.tags=[";
  for (int i = 0; i < 10000; ++i) tags += (i ? ", k" : "k") + std::to_string(i) + "=v";
  const CommandResult run = run_mpt(train_args(
      dir + "/run", {"train.max_steps=2", "tracking.mlflow.uri=http://127.0.0.1:9/" + std::string(10000, 'p'),
                     "tracking.mlflow.experiment=" + std::string(10000, 'e'), tags + "]",
                     "tracking.mlflow.spool=" + dir + "/spool"}));
  INFO(run.output.substr(0, 4000));
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.size() < 30000);  // 0.55 MB before (the spec table alone is 20 kB)
  CHECK(fs::file_size(dir + "/run/train.log") < 30000);
  CHECK_THAT(run.output, Catch::Contains("(10019 bytes)"));  // the URI, with its length
}

TEST_CASE("an alias bomb in a spec is refused at once, naming the line", "[fast][cli]") {
  const std::string dir = scratch_dir("hardening-aliases");
  std::ofstream(dir + "/bomb.yaml") << alias_bomb("x") << "optimizer:\n  lr: *x9\n";
  const auto start = std::chrono::steady_clock::now();
  for (const auto& args : {std::vector<std::string>{"inspect", dir + "/bomb.yaml"},
                           std::vector<std::string>{"train", dir + "/bomb.yaml", "--run-dir", dir + "/run"}}) {
    const CommandResult run = run_mpt(args);
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.output, Catch::Contains("bomb.yaml:5: its aliases expand it to more than 100000 values"));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));  // a bound, not a benchmark
}

TEST_CASE("a run resumed off the logging grid logs each step once, with the uninterrupted run's values",
          "[fast][cli]") {
  const std::string dir = scratch_dir("hardening-resume-logs");
  const std::vector<std::string> overrides = {"train.max_steps=60", "train.log_every_steps=10",
                                              "train.eval_every_steps=30", "checkpoint.every_steps=25",
                                              "checkpoint.keep_last=5"};
  REQUIRE(run_mpt(train_args(dir + "/whole", overrides)).exit_code == 0);
  // What kill -9 at step 60 leaves when the checkpoints at 50 and 60 never made it: logs past the checkpoint at 25.
  REQUIRE(run_mpt(train_args(dir + "/killed", overrides)).exit_code == 0);
  for (const char* file : {"checkpoints/step-000000050.mpt", "checkpoints/step-000000060.mpt", "summary.json"})
    fs::remove(dir + "/killed/" + file);
  const CommandResult resumed = run_mpt(train_args(dir + "/killed", overrides));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resuming at step 25: cut the"));
  const auto whole = timeless(dir + "/whole/metrics.jsonl"), again = timeless(dir + "/killed/metrics.jsonl");
  REQUIRE(again.size() == whole.size());  // every step once: 10, 20, ..., 60 and the evaluations
  for (size_t i = 0; i < whole.size(); ++i) CHECK(again[i] == whole[i]);  // the window averages included
  std::vector<std::pair<std::string, int64_t>> events;
  for (const auto& event : read_jsonl(dir + "/killed/events.jsonl"))
    events.emplace_back(event["kind"], event.value("step", int64_t{-1}));
  CHECK(events == std::vector<std::pair<std::string, int64_t>>{
                      {"checkpoint", 25}, {"resume", 25}, {"checkpoint", 50}, {"checkpoint", 60}});
}

TEST_CASE("a checkpoint with NaN weights is refused naming the tensor, and --resume auto takes the one before it",
          "[fast][cli]") {
  const std::string dir = scratch_dir("hardening-nan-checkpoint"), run = dir + "/run";
  const std::vector<std::string> overrides = {"train.max_steps=6", "checkpoint.every_steps=3",
                                              "train.log_every_steps=3"};
  REQUIRE(run_mpt(train_args(run, overrides)).exit_code == 0);
  const std::string newest = run + "/checkpoints/step-000000006.mpt";
  std::string name;
  doctor_checkpoint(newest, overrides, [&](mpt::io::ModelTensors& weights) {
    name = weights.parameters.keys().front();
    weights.parameters[name][0][0] = std::nanf("");
  });
  fs::copy_file(newest, dir + "/doctored.mpt");
  fs::remove(run + "/summary.json");

  const CommandResult named =
      run_mpt(train_args(dir + "/other", {"train.max_steps=8", "--resume", dir + "/doctored.mpt"}));
  CHECK(named.exit_code == 2);
  CHECK_THAT(named.output, Catch::Contains("tensor '" + name + "' holds 1 non-finite value (NaN or Inf)"));

  std::vector<std::string> longer = overrides;
  longer[0] = "train.max_steps=8";
  const CommandResult resumed = run_mpt(train_args(run, longer));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  const ResumeRecord record = resume_record(run, newest);
  CHECK_THAT(record.rejection, Catch::Contains("tensor '" + name + "' holds 1 non-finite value"));
  CHECK(record.resumed_at == 3);
  const nlohmann::json summary = read_json(run + "/summary.json");
  CHECK(summary["status"] == "completed");
  CHECK(std::isfinite(summary["train"]["loss"].get<double>()));
}

TEST_CASE("export --out must name something", "[fast][cli]") {
  const CommandResult run = run_mpt({"export", "/nonexistent", "--format", "safetensors", "--out", ""});
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.output, Catch::Contains("--out: expected a file (a folder for --format hf), got an empty path"));
}
