// `mpt train` end to end on real Fashion-MNIST: outputs, loss-scale events, skipped steps, bad input.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "hardware/hardware.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");
const std::string kFp32 = source_path("configs/mlp_fmnist_fp32.yaml");

}  // namespace

TEST_CASE("a mixed run with injected overflows backs off, skips, and does not advance the LR", "[slow][cli]") {
  const std::string dir = scratch_dir("cli-mixed");
  CommandResult run =
      run_mpt({"train", kMixed, "train.max_steps=300", "train.log_every_steps=1", "schedule.warmup_steps=100",
               "precision.loss_scale.growth_interval=100", "debug.inject_nonfinite_grad_at=[50, 120]",
               "checkpoint.every_steps=100", "data.test_limit=2000", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (const char* file : {"config.yaml", "train.log", "metrics.jsonl", "events.jsonl", "summary.json"})
    CHECK(std::filesystem::exists(dir + "/" + file));
  int event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      event_files += std::filesystem::file_size(entry.path()) > 300 * 7 * 30;  // 300 steps x 7 scalars x ~40 B
  CHECK(event_files == 1);

  nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "completed");
  CHECK(summary["steps"] == 300);
  CHECK(summary["skipped_steps"] == 2);
  CHECK(summary["precision"] == "mixed_bf16");
  CHECK(summary["loss_scale"]["backoffs"] == 2);
  CHECK(summary["loss_scale"]["growths"] == 1);
  CHECK(summary["loss_scale"]["min"] == 8192.0);
  CHECK(summary["eval"]["accuracy"].get<double>() > 0.75);
  CHECK(summary["samples_per_sec"].get<double>() > 0);
  CHECK(summary["peak_memory_bytes"].get<int64_t>() > 0);

  // Scale: 32768, backoff at 50 -> 16384, backoff at 120 (only 69 clean steps since) -> 8192, then 100 clean
  // steps 121..220 -> growth at 220 -> 16384; the next growth would be at 320, past the run.
  std::vector<std::pair<std::string, int64_t>> expected = {
      {"skip", 50}, {"backoff", 50}, {"skip", 120}, {"backoff", 120}, {"growth", 220}};
  std::vector<std::pair<std::string, int64_t>> scale_events;
  for (const auto& e : read_jsonl(dir + "/events.jsonl")) {
    std::string kind = e["kind"];
    if (kind == "skip" || kind == "backoff" || kind == "growth")
      scale_events.emplace_back(kind, e["step"].get<int64_t>());
    if (kind == "backoff" && e["step"] == 50) {
      CHECK(e["old_scale"] == 32768.0);
      CHECK(e["new_scale"] == 16384.0);
      CHECK(e["skipped_steps"] == 1);
    }
  }
  CHECK(scale_events == expected);

  // The LR schedule (warmup) is a function of applied steps: the step after a skip reuses the skipped LR.
  auto lr = metric_series(dir, "lr");
  REQUIRE(lr.size() == 300);
  CHECK(lr[48].second < lr[49].second);   // steps 49 -> 50 advance
  CHECK(lr[49].second == lr[50].second);  // step 50 was skipped: step 51 gets the same LR
  CHECK(lr[50].second < lr[51].second);
  CHECK(lr[99].second == Approx(0.001 * 99 / 100));  // the skip at 50 shifted warmup by one step:
  CHECK(lr[100].second == Approx(0.001));            // the peak comes at step 101, not 100
  auto scale = metric_series(dir, "loss_scale");
  CHECK(scale[49].second == 16384.0);

  std::string log = read_file_text(dir + "/train.log");
  CHECK_THAT(log, Catch::Contains("step 50: loss scale backoff 32768 -> 16384"));
  CHECK(log.find('\033') == std::string::npos);  // no control characters in files
}

TEST_CASE("master_weights trains, skips an overflow in a BF16 gradient and names its layer", "[fast][cli]") {
  // On one CPU process this strategy steps in one pass over the model's BF16 gradients (ops::step_masters):
  // the overflow check, the culprit search and the injection all work on those gradients.
  const std::string dir = scratch_dir("cli-master-weights");
  CommandResult run =
      run_mpt({"train", kMixed, "precision.strategy=master_weights", "train.max_steps=300",
               "precision.loss_scale.init=1024", "debug.inject_nonfinite_grad_at=[40]",
               "debug.inject_nonfinite_param=hidden.0.weight", "data.test_limit=2000", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["steps"] == 300);
  CHECK(summary["skipped_steps"] == 1);
  CHECK(summary["loss_scale"]["backoffs"] == 1);
  CHECK(summary["eval"]["accuracy"].get<double>() > 0.75);
  bool named = false;
  for (const auto& e : read_jsonl(dir + "/events.jsonl"))
    if (e["kind"] == "skip") named = e["step"] == 40 && e["nonfinite_params"][0]["name"] == "hidden.0.weight";
  CHECK(named);
  auto loss = metric_series(dir, "loss");
  REQUIRE(loss.size() >= 2);
  CHECK(loss.back().second < 0.6 * loss.front().second);
}

TEST_CASE("a collapsing scale ends the run as diverged and names the overflowing layer", "[fast][cli]") {
  const std::string dir = scratch_dir("cli-collapse");
  CommandResult run = run_mpt({"train", kMixed, "train.max_steps=50", "data.train_limit=2048", "data.test_limit=100",
                               "precision.loss_scale.init=4", "precision.loss_scale.max_overflows_at_min=3",
                               "debug.inject_nonfinite_grad_at=[1, 2, 3, 4, 5, 6, 7, 8]",
                               "debug.inject_nonfinite_param=head.weight", "--run-dir", dir});
  INFO(run.output);
  CHECK(run.exit_code == 1);
  nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "diverged");
  CHECK(summary["steps"] == 5);  // 4 -> 2 -> 1, then 3 overflows at the floor: steps 3, 4, 5
  CHECK_THAT(summary["diagnosis"].get<std::string>(),
             Catch::Contains("collapsed to its floor") && Catch::Contains("head.weight (1 non-finite"));
  // The head is an FP32 island of the default policy: the advice must not tell the user to make it FP32.
  CHECK_THAT(summary["diagnosis"].get<std::string>(),
             Catch::Contains("Layers already computing in FP32 (head) gain nothing from a wider dtype") &&
                 !Catch::Contains("Keeping head in FP32"));
  bool named = false;
  for (const auto& e : read_jsonl(dir + "/events.jsonl"))
    if (e["kind"] == "skip") named = e["nonfinite_params"][0]["name"] == "head.weight";
  CHECK(named);
  CHECK_THAT(run.output, Catch::Contains("training diverged"));
}

TEST_CASE("an overflow during gradient accumulation skips exactly one optimizer step", "[fast][cli]") {
  const std::string dir = scratch_dir("cli-accum-overflow");
  CommandResult run = run_mpt({"train", kMixed, "train.max_steps=6", "train.grad_accum_steps=4", "data.batch_size=32",
                               "data.train_limit=2048", "data.test_limit=100", "debug.inject_nonfinite_grad_at=[3]",
                               "train.log_every_steps=1", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["steps"] == 6);
  CHECK(summary["skipped_steps"] == 1);
  CHECK(summary["loss_scale"]["backoffs"] == 1);
  CHECK(metric_series(dir, "loss").size() == 6);

  CommandResult typo = run_mpt({"train", kMixed, "train.max_steps=2", "debug.inject_nonfinite_grad_at=[1]",
                                "debug.inject_nonfinite_param=head.wieght", "--run-dir", scratch_dir("cli-typo")});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("no such parameter; it has hidden.0.weight"));
}

TEST_CASE("check_numerics on a healthy run reports nothing and still trains", "[fast][cli]") {
  const std::string dir = scratch_dir("cli-numerics");
  CommandResult run = run_mpt({"train", kMixed, "train.max_steps=20", "data.train_limit=2048", "data.test_limit=500",
                               "debug.check_numerics=true", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  for (const auto& e : read_jsonl(dir + "/events.jsonl")) CHECK(e["kind"] != "nonfinite_activation");
  nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["tf32"] == false);  // a CUDA switch: never on for a CPU run
  CHECK(summary["eval"]["accuracy"].get<double>() > 0.5);
}

TEST_CASE("bad input is a one-line error with exit code 2", "[fast][cli]") {
  const std::string dir = scratch_dir("cli-bad");
  CommandResult unknown = run_mpt({"train", kFp32, "optimizer.lr=fast", "optimizer.learning_rate=1", "--run-dir", dir});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.output, Catch::Contains("optimizer.lr = fast: expected a number > 0"));
  CHECK_THAT(unknown.output, Catch::Contains("unknown key 'optimizer.learning_rate'"));
  CHECK_FALSE(std::filesystem::exists(dir + "/config.yaml"));  // validated before any work

  CommandResult missing = run_mpt({"train", "/nonexistent.yaml"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("/nonexistent.yaml: cannot open the spec file"));

  CommandResult flag = run_mpt({"train", kFp32, "--no-such-flag"});
  CHECK(flag.exit_code == 2);
  CommandResult no_command = run_mpt({});
  CHECK(no_command.exit_code == 2);

  CommandResult fp16 = run_mpt({"train", kFp32, "precision.mode=mixed_fp16", "device.type=cpu"});
  CHECK(fp16.exit_code == 2);
  CHECK_THAT(fp16.output, Catch::Contains("mixed_fp16 needs device.type cuda"));

  std::ofstream(dir + "/junk.mpt") << "not a checkpoint";
  CommandResult resume = run_mpt({"train", kFp32, "--run-dir", dir + "/r", "--resume", dir + "/junk.mpt"});
  CHECK(resume.exit_code == 2);
  CHECK_THAT(resume.output, Catch::Contains("junk.mpt: only 16 bytes"));
}

TEST_CASE("broken data files fail with the file and offset, not a crash", "[fast][cli]") {
  const std::string dir = scratch_dir("cli-data");
  for (const char* name :
       {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    std::filesystem::copy_file(kFashionMnistRoot + "/" + name + ".gz", dir + "/" + name + ".gz");
  std::filesystem::resize_file(dir + "/train-images-idx3-ubyte.gz", 100000);
  CommandResult run = run_mpt({"train", kFp32, "data.root=" + dir, "--run-dir", dir + "/run"});
  CHECK(run.exit_code == 1);
  CHECK_THAT(run.output, Catch::Contains("train-images-idx3-ubyte.gz: corrupt or truncated gzip stream"));
}

TEST_CASE("a run directory of another spec is refused, never mixed", "[fast][cli]") {
  const std::string dir = scratch_dir("cli-mixing");
  REQUIRE(run_mpt({"train", kFp32, "train.max_steps=5", "data.test_limit=100", "--run-dir", dir}).exit_code == 0);
  const std::string summary = read_file_text(dir + "/summary.json");
  CommandResult again = run_mpt({"train", kFp32, "train.max_steps=5", "data.test_limit=100", "--run-dir", dir});
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("already completed 5 of 5 steps"));
  CHECK(read_file_text(dir + "/summary.json") == summary);  // the finished run's record is kept
  CommandResult other = run_mpt({"train", kFp32, "train.max_steps=5", "optimizer.lr=0.5", "--run-dir", dir});
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.output, Catch::Contains("holds a run of a different spec") && Catch::Contains("optimizer.lr"));
  CommandResult never = run_mpt({"train", kFp32, "train.max_steps=5", "--run-dir", dir, "--resume", "never"});
  CHECK(never.exit_code == 2);
  CHECK_THAT(never.output, Catch::Contains("already holds checkpoints"));

  // A run written by an older mpt lacks the keys added since; their defaults described it, so it continues.
  std::string config = read_file_text(dir + "/config.yaml");
  const size_t section = config.find("\ndistributed:");
  REQUIRE(section != std::string::npos);
  size_t next = config.find('\n', section + 1);  // the section ends at the next line that is not indented
  while (next != std::string::npos && next + 1 < config.size() && config[next + 1] == ' ')
    next = config.find('\n', next + 1);
  std::ofstream(dir + "/config.yaml") << config.substr(0, section + 1) + config.substr(next + 1);
  CommandResult older = run_mpt({"train", kFp32, "train.max_steps=6", "data.test_limit=100", "--run-dir", dir});
  CHECK(older.exit_code == 0);
  CHECK_THAT(older.output, Catch::Contains("resumed from"));
}

TEST_CASE("mpt doctor reports the environment and what mixed resolves to", "[fast][cli]") {
  CommandResult doctor = run_mpt({"doctor"});
  INFO(doctor.output);
  CHECK(doctor.exit_code == 0);
  CHECK_THAT(doctor.output, Catch::Contains("LibTorch") && Catch::Contains("BLAS") &&
                                Catch::Contains("precision.mode: mixed") && Catch::Contains("ok: mpt can train here"));
  CHECK_THAT(doctor.output, Catch::Contains("mkl"));  // the wheel's LibTorch names its BLAS
  CHECK_THAT(doctor.output, Catch::Contains("built with CUDA") || Catch::Contains("(CUDA)"));
#ifdef MPT_BUILD_LINKS_TCMALLOC
  CHECK_THAT(doctor.output, Catch::Contains("tcmalloc"));  // and links tcmalloc (setup installs both)
#endif
}

TEST_CASE("mpt inspect reports parameters per module and FLOPs", "[fast][cli]") {
  CommandResult json = run_mpt({"inspect", kFp32, "--json"});
  INFO(json.output);
  REQUIRE(json.exit_code == 0);
  nlohmann::json report = nlohmann::json::parse(json.output);
  CHECK(report["total_parameters"] == 784 * 512 + 512 + 512 * 10 + 10);
  CHECK(report["modules"]["head"] == 512 * 10 + 10);
  CHECK(report["forward_macs_per_sample"] == 784 * 512 + 512 * 10);
  CommandResult resnet = run_mpt({"inspect", kFp32, "model.name=resnet18", "model.small_input=true"});
  CHECK(resnet.exit_code == 0);
  CHECK_THAT(resnet.output, Catch::Contains("layer4") && Catch::Contains("11172810 parameters"));
  CommandResult imagenet_style =
      run_mpt({"inspect", kFp32, "model.name=resnet50", "data.channels=3", "data.image_size=224", "--json"});
  REQUIRE(imagenet_style.exit_code == 0);
  nlohmann::json resnet50 = nlohmann::json::parse(imagenet_style.output);
  CHECK(resnet50["total_parameters"] == 25557032 - (2048 * 1000 + 1000) + (2048 * 10 + 10));  // 10-class fc
  CHECK(resnet50["input"] == nlohmann::json::array({3, 224, 224}));
  CHECK(resnet50["tensor_cores"].is_null());  // plain FP32 gives the Tensor Cores nothing to check

  // What a CUDA run would give the Tensor Cores: a hidden width of 300 and a batch of 100 miss the multiple of 8.
  CommandResult mixed = run_mpt({"inspect", kMixed, "model.hidden_sizes=[300]", "data.batch_size=100"});
  INFO(mixed.output);
  CHECK(mixed.exit_code == 0);
  CHECK_THAT(mixed.output, Catch::Contains("hidden.0 out_features 300 (-> 304)") &&
                               Catch::Contains("data.batch_size rows 100 (-> 104)"));
}

TEST_CASE("docs/spec.md is the current schema", "[fast][cli]") {
  CommandResult keys = run_mpt({"keys", "--markdown"});
  REQUIRE(keys.exit_code == 0);
  CHECK(keys.output == read_file_text(source_path("docs/spec.md")));
}

TEST_CASE("mpt help CMD, -V, and an unknown command named with the nearest one", "[fast][cli]") {
  const auto help = run_mpt({"help", "train"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("Train a model from a YAML spec") && Catch::Contains("--resume"));
  const auto version = run_mpt({"-V"});
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.output, Catch::StartsWith("mpt "));
  const auto typo = run_mpt({"trian", "configs/mlp_fmnist_fp32.yaml"});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("unknown command 'trian'; did you mean 'train'?"));
  const auto bench_help = run_mpt({"bench", "--help"});
  CHECK_THAT(bench_help.output, Catch::Contains("--no-peak") && !Catch::Contains("{false}"));
}

TEST_CASE("a run refused before its first step leaves no run directory behind", "[fast][cli]") {
  const std::string run_dir = scratch_dir("refused-run") + "/run";
  const auto refused = run_mpt({"train", source_path("configs/mlp_fmnist_fp32.yaml"), "--run-dir", run_dir,
                                "debug.inject_nonfinite_grad_at=[2]", "debug.inject_nonfinite_param=nope"});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("debug.inject_nonfinite_param = nope: the model has no such parameter"));
  CHECK_FALSE(std::filesystem::exists(run_dir));
}

TEST_CASE(
    "precision.mode fp8 trains the MLP with its hidden layer in FP8: scale events, scales in the metrics, "
    "inspect names the layers",
    "[slow][cli][fp8]") {
  const std::string dir = scratch_dir("fp8-train"), run = dir + "/run";
  CommandResult train = run_mpt({"train", source_path("configs/mlp_fmnist_fp8.yaml"), "train.max_steps=200",
                                 "train.log_every_steps=50", "--run-dir", run});
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const nlohmann::json summary = read_json(run + "/summary.json");
  CHECK(summary["precision"] == "fp8");
  CHECK(summary["eval"]["accuracy"].get<double>() > 0.75);  // it learns (0.85 here after 300 steps)
  int scale_events = 0;
  for (const auto& event : read_jsonl(run + "/events.jsonl"))
    if (event["kind"] == "fp8_scale") {
      ++scale_events;
      CHECK_THAT(event["tensor"].get<std::string>(), Catch::StartsWith("hidden.0."));
      CHECK(event["scale"].get<double>() > 0);
    }
  CHECK(scale_events >= 3);  // the input's, the weight's and the output gradient's first scales
  bool scales_logged = false;
  for (const auto& line : read_jsonl(run + "/metrics.jsonl"))
    if (line["kind"] == "train" && line.contains("fp8"))
      scales_logged = line["fp8"]["weight_scale"][0].get<double>() > 1;
  CHECK(scales_logged);
  // An export holds the weights, not the FP8 scaling state.
  const std::string exported = dir + "/model.safetensors";
  REQUIRE(run_mpt({"export", run, "--out", exported}).exit_code == 0);
  CHECK(read_file_text(exported).find("fp8.") == std::string::npos);

  CommandResult inspect = run_mpt({"inspect", source_path("configs/mlp_fmnist_fp8.yaml")});
  CHECK_THAT(inspect.output, Catch::Contains("FP8 (precision.mode fp8): 1 of 2 Linear layers"));
  CHECK_THAT(inspect.output, Catch::Contains("FP32: an FP32 island"));
}

TEST_CASE("precision.fp8.recipe mxfp8 trains the MLP with its hidden layer in MXFP8, and inspect says so",
          "[slow][cli][mxfp8]") {
  const std::string run = scratch_dir("mxfp8-train") + "/run";
  CommandResult train = run_mpt({"train", source_path("configs/mlp_fmnist_mxfp8.yaml"), "train.max_steps=300",
                                 "train.log_every_steps=100", "--run-dir", run});
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const nlohmann::json summary = read_json(run + "/summary.json");
  CHECK(summary["precision"] == "fp8");
  CHECK(summary["eval"]["accuracy"].get<double>() > 0.75);  // it learns (0.85 after 300 steps here)
  CommandResult inspect = run_mpt({"inspect", source_path("configs/mlp_fmnist_mxfp8.yaml")});
  CHECK_THAT(inspect.output, Catch::Contains("MXFP8 (precision.mode fp8): 1 of 2 Linear layers"));
}
