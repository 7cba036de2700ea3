// The CLI table (see cli.h).
#include "app/cli.h"

#include <torch/version.h>

#include "common/edit_distance.h"
#include "common/error.h"
#include "mpt/version.h"

namespace mpt::app {

Cli::Cli() {
  app_.require_subcommand(1);
  app_.set_version_flag("-V,--version",
                        std::string("mpt ") + kVersion + " (git " + kGitHash + ", LibTorch " + TORCH_VERSION + ")");
  add_train();
  add_ab_compare();
  add_bench();
  add_small_commands();
  add_numerics();
}

void Cli::add_train() {
  CLI::App* train = app_.add_subcommand("train", "Train a model from a YAML spec");
  train->add_option("spec", train_.spec_path, "Experiment spec (YAML)")->required();
  train->add_option("overrides", train_.overrides, "key=value overrides, e.g. optimizer.lr=3e-4 train.epochs=1");
  train->add_option("--run-dir", train_.run_dir, "Run directory (default: experiment.output_root/experiment.name)");
  train->add_option("--resume", train_.resume, "auto (newest valid checkpoint), never, or a checkpoint path")
      ->default_str("auto");
  train
      ->add_option("--nproc", train_.nproc,
                   "Data-parallel ranks to start on this machine (like torchrun --standalone); under torchrun or "
                   "srun leave it out: the launcher's RANK/WORLD_SIZE are used")
      ->check(CLI::Range(1, 1024));
  train->add_flag("--all-keys", train_.all_keys,
                  "List every spec key before step 0, also those of other model families, data and modes");
}

void Cli::add_ab_compare() {
  CLI::App* ab = app_.add_subcommand(
      "ab-compare", "Train or reuse A (FP32) and B (mixed) alike and compare them: PASS (0) or FAIL (3)");
  ab->add_option("a", ab_.a, "Baseline spec (YAML) or finished run directory")->required();
  ab->add_option("b", ab_.b, "Candidate spec (YAML) or finished run directory")->required();
  ab->add_option("overrides", ab_.overrides, "key=value overrides applied to both specs");
  ab->add_option("--out", ab_.out, "Folder for both runs and the reports (default OUTPUT_ROOT/ab-A-vs-B)");
  ab->add_option("--allow-diff", ab_.allow_diff, "Spec keys besides precision.* that may differ (comma-separated)")
      ->delimiter(',');
  ab->add_option("--repeats", ab_.repeats, "Seeds per side, for the seed-to-seed noise")->check(CLI::Range(1, 100));
  ab->add_option("--speed-rounds", ab_.speed_rounds,
                 "Rounds of `mpt bench` on both sides, alternating, for the speed-up (0: the training runs' means)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  ab->add_option("--max-batch-budget", ab_.max_batch_budget_mib,
                 "Also find each side's largest batch within this many MiB of training-step memory")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  ab->add_option("--max-accuracy-drop", ab_.max_accuracy_drop, "How far B's test accuracy may trail A's (absolute)")
      ->default_str("0.005")
      ->check(CLI::Range(0.0, 1.0));
}

void Cli::add_bench() {
  CLI::App* bench = app_.add_subcommand(
      "bench", "Measure a spec's training step: samples/s, step time, breakdown, FLOP/s, MFU, peak memory");
  bench->add_option("spec", bench_.spec_path, "Experiment spec (YAML)")->required();
  bench->add_option("overrides", bench_.overrides, "key=value overrides");
  bench->add_option("--steps", bench_.steps, "Timed steps")->check(CLI::Range(1, 1000000));
  bench->add_option("--warmup", bench_.warmup, "Untimed steps first")->check(CLI::Range(0, 1000000));
  bench->add_flag("--real-data", bench_.real_data, "Use the real data loader instead of synthetic batches");
  bench->add_flag("--json", bench_.json, "Print JSON instead of a table");
  bench->add_flag("--no-peak", no_peak_, "Skip the GEMM peak probe (no MFU)");
  bench->add_flag("--loader-only", bench_.loader_only, "Measure the data loader alone (samples/s it delivers)");
  bench->add_option("--json-out", bench_.json_out, "Also write the JSON result to this file");
  bench
      ->add_option("--profile", bench_.profile_ops,
                   "Run the timed steps under LibTorch's profiler and list this many ops by self time")
      ->check(CLI::Range(1, 100000));
  bench->add_flag("--max-batch", bench_.max_batch,
                  "Find the largest batch within --memory-budget-mib in FP32 and in mixed precision");
  bench->add_option("--memory-budget-mib", bench_.memory_budget_mib, "Peak memory budget for --max-batch")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 30));
}

void Cli::add_small_commands() {
  CLI::App* nightly = app_.add_subcommand(
      "nightly", "Run a suite of train and A/B jobs unattended (cron): lock, history, regressions, recovery");
  nightly->add_option("suite", nightly_.suite_path, "Suite (YAML)")->required();
  nightly->add_option("--root", nightly_.root, "Folder of nights, history and trends (default runs/nightly/SUITE)");
  for (auto [name, what, options] :
       {std::tuple{"inspect", "Show the model a spec builds: parameters and FLOPs", &inspect_},
        std::tuple{"eval", "Evaluate a spec's model (model.init_from) on its test data", &eval_}}) {
    CLI::App* command = app_.add_subcommand(name, what);
    command->add_option("spec", options->spec_path, "Experiment spec (YAML)")->required();
    command->add_option("overrides", options->overrides,
                        "key=value overrides, e.g. model.init_from=RUN/checkpoints/...");
    command->add_flag("--json", options->json, "Print JSON instead of a table");
  }
  app_.get_subcommand("inspect")
      ->add_option("--ranks", inspect_.ranks,
                   "Data-parallel ranks for the state per rank (distributed.shard_optimizer splits it)")
      ->check(CLI::Range(1, 4096));
  CLI::App* exporting = app_.add_subcommand(
      "export", "Write a run's weights as safetensors, a PyTorch file or a Hugging Face model folder");
  exporting->add_option("source", export_.source, "Checkpoint file or run directory")->required();
  exporting->add_option("--format", export_.format, "safetensors | torch | hf (BERT runs)")
      ->check(CLI::IsMember({"safetensors", "torch", "hf"}));
  exporting->add_option("--out", export_.out, "Output file (a folder for hf)")->required();
  exporting->add_flag("--force", export_.force,
                      "hf: write into a folder that holds files, removing those a Hugging Face loader would read");
  app_.add_subcommand("doctor", "Check the environment: LibTorch, GPU, BF16, BLAS, threads");
  app_.add_subcommand("keys", "List every spec key with its type, default and meaning")
      ->add_flag("--markdown", markdown_, "Print the table as markdown (docs/spec.md)");
  CLI::App* tokenize = app_.add_subcommand(
      "tokenize", "Split text into the tokens (and ids) mpt trains with: WordPiece or a tokenizer.json");
  tokenize->add_option("input", tokenize_.input, "A UTF-8 file, one text per line (default: standard input)");
  tokenize->add_option("--vocab", tokenize_.vocab, "WordPiece vocab.txt (data.vocab)")->capture_default_str();
  tokenize->add_option("--tokenizer", tokenize_.tokenizer,
                       "A Hugging Face tokenizer.json or its folder (data.tokenizer), instead of --vocab");
  tokenize->add_flag("--cased", tokenize_.cased, "Keep case and accents (data.lowercase: false)");
  tokenize->add_flag("--json", tokenize_.json, "One JSON object per line: tokens and ids");
}

void Cli::add_numerics() {
  CLI::App* numerics = app_.add_subcommand(
      "numerics", "Measure each layer's precision loss under BF16, FP16, FP8 and MXFP8 on the spec's data");
  numerics->add_option("spec", numerics_.spec_path, "Experiment spec (YAML)")->required();
  numerics->add_option("overrides", numerics_.overrides, "key=value overrides");
  numerics->add_option("--from", numerics_.from, "Weights: a checkpoint or a run directory (its newest valid one)");
  numerics->add_option("--batches", numerics_.batches, "Training batches to measure on")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  numerics->add_option("--formats", numerics_.formats, "Candidate formats, comma-separated")->capture_default_str();
  numerics->add_flag("--no-alone", numerics_.no_alone,
                     "Skip the model's error with each layer alone in a format (one forward per layer and format)");
  numerics->add_option("--out", numerics_.out,
                       "Folder for numerics.json and numerics.html (default OUTPUT_ROOT/numerics-NAME)");
  numerics->add_flag("--json", numerics_.json, "Print numerics.json instead of the table");
}

CLI::App* Cli::command(const std::string& name) {
  for (CLI::App* sub : app_.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

std::string Cli::nearest_command(const std::string& typed) {
  std::string best;
  size_t best_distance = 3;
  for (CLI::App* sub : app_.get_subcommands([](CLI::App*) { return true; }))
    if (const size_t d = edit_distance(typed, sub->get_name()); d < best_distance)
      best = sub->get_name(), best_distance = d;
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

std::string Cli::nearest_option(int argc, char** argv) {
  CLI::App* sub = argc >= 2 ? command(argv[1]) : nullptr;
  if (!sub) return "";
  for (int i = 2; i < argc; ++i) {
    const std::string typed = std::string(argv[i]).substr(0, std::string(argv[i]).find('='));
    if (typed.rfind("--", 0) != 0 || typed.size() < 3) continue;
    std::string best;
    size_t best_distance = 3;
    bool known = false;
    for (const CLI::Option* option : sub->get_options())
      for (const std::string& name : option->get_lnames()) {
        known = known || typed == "--" + name;
        if (const size_t d = edit_distance(typed, "--" + name); d < best_distance)
          best = "--" + name, best_distance = d;
      }
    if (!known && !best.empty()) return "; did you mean '" + best + "'?";
  }
  return "";
}

int Cli::run() {
  bench_.measure_peak = !no_peak_;
  const auto parsed = [&](const char* name) { return command(name)->parsed(); };
  if (parsed("train")) return run_train(train_);
  if (parsed("ab-compare")) return run_ab_compare(ab_);
  if (parsed("nightly")) return run_nightly(nightly_);
  if (parsed("bench")) return run_bench(bench_);
  if (parsed("keys")) return run_keys(markdown_);
  if (parsed("tokenize")) return run_tokenize(tokenize_);
  if (parsed("numerics")) return run_numerics(numerics_);
  if (parsed("doctor")) return run_doctor();
  if (parsed("export")) return run_export(export_);
  if (parsed("eval")) return run_eval(eval_.spec_path, eval_.overrides, eval_.json);
  if (parsed("inspect")) return run_inspect(inspect_.spec_path, inspect_.overrides, inspect_.json, inspect_.ranks);
  return kExitUsage;
}

}  // namespace mpt::app
