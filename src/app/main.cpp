// mpt's entry point: one table of subcommands and flags; errors become the documented exit codes.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "common/echo.h"
#include "common/edit_distance.h"
#include "common/error.h"
#include "hardware/hardware.h"
#include "mpt/version.h"

namespace {

// "; did you mean 'train'?" for a command within two edits of a known one, else "".
std::string nearest_command(CLI::App& cli, const std::string& typed) {
  std::string best;
  size_t best_distance = 3;
  for (CLI::App* sub : cli.get_subcommands([](CLI::App*) { return true; }))
    if (const size_t d = mpt::edit_distance(typed, sub->get_name()); d < best_distance)
      best = sub->get_name(), best_distance = d;
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

// A path the system refuses for what it is (too long, a file where a folder belongs, a loop, no permission) is
// the user's to fix; a disk that fails or fills is the run's failure.
bool is_path_mistake(const std::error_code& code) {
  for (std::errc mistake : {std::errc::filename_too_long, std::errc::not_a_directory, std::errc::is_a_directory,
                            std::errc::no_such_file_or_directory, std::errc::too_many_symbolic_link_levels,
                            std::errc::permission_denied, std::errc::file_exists})
    if (code == mistake) return true;
  return false;
}

// "; did you mean '--nproc'?" for the first unknown --option in `args` within two edits of one `command` has.
std::string nearest_option(CLI::App* command, int argc, char** argv) {
  if (!command) return "";
  for (int i = 2; i < argc; ++i) {
    const std::string typed = std::string(argv[i]).substr(0, std::string(argv[i]).find('='));
    if (typed.rfind("--", 0) != 0 || typed.size() < 3) continue;
    std::string best;
    size_t best_distance = 3;
    bool known = false;
    for (const CLI::Option* option : command->get_options()) {
      for (const std::string& name : option->get_lnames()) {
        known = known || typed == "--" + name;
        if (const size_t d = mpt::edit_distance(typed, "--" + name); d < best_distance) best = "--" + name, best_distance = d;
      }
    }
    if (!known && !best.empty()) return "; did you mean '" + best + "'?";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe or the file-size limit then fails the write with a message naming the file (EPIPE, EFBIG)
  // instead of killing mpt silently.
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  mpt::hardware::tune_host_allocator();
  CLI::App cli{"mpt: mixed-precision training on LibTorch"};
  cli.require_subcommand(1);
  cli.set_version_flag("-V,--version", std::string("mpt ") + mpt::kVersion + " (git " + mpt::kGitHash + ", LibTorch " +
                                        TORCH_VERSION + ")");

  mpt::app::TrainOptions train;
  CLI::App* train_cmd = cli.add_subcommand("train", "Train a model from a YAML spec");
  train_cmd->add_option("spec", train.spec_path, "Experiment spec (YAML)")->required();
  train_cmd->add_option("overrides", train.overrides, "key=value overrides, e.g. optimizer.lr=3e-4 train.epochs=1");
  train_cmd->add_option("--run-dir", train.run_dir, "Run directory (default: experiment.output_root/experiment.name)");
  train_cmd->add_option("--resume", train.resume, "auto (newest valid checkpoint), never, or a checkpoint path")
      ->default_str("auto");
  train_cmd
      ->add_option("--nproc", train.nproc,
                   "Data-parallel ranks to start on this machine (like torchrun --standalone); under torchrun or "
                   "srun leave it out: the launcher's RANK/WORLD_SIZE are used")
      ->check(CLI::Range(1, 1024));

  mpt::app::AbCompareOptions ab;
  CLI::App* ab_cmd = cli.add_subcommand(
      "ab-compare", "Train or reuse A (FP32) and B (mixed) alike and compare them: PASS (0) or FAIL (3)");
  ab_cmd->add_option("a", ab.a, "Baseline spec (YAML) or finished run directory")->required();
  ab_cmd->add_option("b", ab.b, "Candidate spec (YAML) or finished run directory")->required();
  ab_cmd->add_option("overrides", ab.overrides, "key=value overrides applied to both specs");
  ab_cmd->add_option("--out", ab.out, "Folder for both runs and the reports (default OUTPUT_ROOT/ab-A-vs-B)");
  ab_cmd->add_option("--allow-diff", ab.allow_diff, "Spec keys besides precision.* that may differ (comma-separated)")
      ->delimiter(',');
  ab_cmd->add_option("--repeats", ab.repeats, "Seeds per side, for the seed-to-seed noise")->check(CLI::Range(1, 100));
  ab_cmd
      ->add_option("--speed-rounds", ab.speed_rounds,
                   "Rounds of `mpt bench` on both sides, alternating, for the speed-up (0: the training runs' means)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  ab_cmd
      ->add_option("--max-batch-budget", ab.max_batch_budget_mib,
                   "Also find each side's largest batch within this many MiB of training-step memory")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  ab_cmd->add_option("--max-accuracy-drop", ab.max_accuracy_drop, "How far B's test accuracy may trail A's (absolute)")
      ->default_str("0.005")
      ->check(CLI::Range(0.0, 1.0));

  mpt::app::NightlyOptions nightly;
  CLI::App* nightly_cmd = cli.add_subcommand(
      "nightly", "Run a suite of train and A/B jobs unattended (cron): lock, history, regressions, recovery");
  nightly_cmd->add_option("suite", nightly.suite_path, "Suite (YAML)")->required();
  nightly_cmd->add_option("--root", nightly.root, "Folder of nights, history and trends (default runs/nightly/SUITE)");

  mpt::app::BenchOptions bench;
  CLI::App* bench_cmd = cli.add_subcommand(
      "bench", "Measure a spec's training step: samples/s, step time, breakdown, FLOP/s, MFU, peak memory");
  bench_cmd->add_option("spec", bench.spec_path, "Experiment spec (YAML)")->required();
  bench_cmd->add_option("overrides", bench.overrides, "key=value overrides");
  bench_cmd->add_option("--steps", bench.steps, "Timed steps")->check(CLI::Range(1, 1000000));
  bench_cmd->add_option("--warmup", bench.warmup, "Untimed steps first")->check(CLI::Range(0, 1000000));
  bench_cmd->add_flag("--real-data", bench.real_data, "Use the real data loader instead of synthetic batches");
  bench_cmd->add_flag("--json", bench.json, "Print JSON instead of a table");
  bool no_peak = false;
  bench_cmd->add_flag("--no-peak", no_peak, "Skip the GEMM peak probe (no MFU)");
  bench_cmd->add_flag("--loader-only", bench.loader_only, "Measure the data loader alone (samples/s it delivers)");
  bench_cmd->add_option("--json-out", bench.json_out, "Also write the JSON result to this file");
  bench_cmd->add_option("--profile", bench.profile_ops,
                        "Run the timed steps under LibTorch's profiler and list this many ops by self time")
      ->check(CLI::Range(1, 100000));
  bench_cmd->add_flag("--max-batch", bench.max_batch,
                      "Find the largest batch within --memory-budget-mib in FP32 and in mixed precision");
  bench_cmd->add_option("--memory-budget-mib", bench.memory_budget_mib, "Peak memory budget for --max-batch")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 30));

  std::string inspect_spec;
  std::vector<std::string> inspect_overrides;
  bool inspect_json = false;
  CLI::App* inspect_cmd = cli.add_subcommand("inspect", "Show the model a spec builds: parameters and FLOPs");
  inspect_cmd->add_option("spec", inspect_spec, "Experiment spec (YAML)")->required();
  inspect_cmd->add_option("overrides", inspect_overrides, "key=value overrides");
  inspect_cmd->add_flag("--json", inspect_json, "Print JSON instead of a table");

  mpt::app::ExportOptions export_options;
  CLI::App* export_cmd = cli.add_subcommand(
      "export", "Write a run's weights as safetensors, a PyTorch file or a Hugging Face model folder");
  export_cmd->add_option("source", export_options.source, "Checkpoint file or run directory")->required();
  export_cmd->add_option("--format", export_options.format, "safetensors | torch | hf (BERT runs)")
      ->check(CLI::IsMember({"safetensors", "torch", "hf"}));
  export_cmd->add_option("--out", export_options.out, "Output file (a folder for hf)")->required();

  std::string eval_spec;
  std::vector<std::string> eval_overrides;
  bool eval_json = false;
  CLI::App* eval_cmd = cli.add_subcommand("eval", "Evaluate a spec's model (model.init_from) on its test data");
  eval_cmd->add_option("spec", eval_spec, "Experiment spec (YAML)")->required();
  eval_cmd->add_option("overrides", eval_overrides, "key=value overrides, e.g. model.init_from=RUN/checkpoints/...");
  eval_cmd->add_flag("--json", eval_json, "Print JSON");

  CLI::App* doctor_cmd = cli.add_subcommand("doctor", "Check the environment: LibTorch, GPU, BF16, BLAS, threads");

  bool markdown = false;
  CLI::App* keys_cmd = cli.add_subcommand("keys", "List every spec key with its type, default and meaning");
  keys_cmd->add_flag("--markdown", markdown, "Print the table as markdown (docs/spec.md)");

  mpt::app::TokenizeOptions tokenize;
  CLI::App* tokenize_cmd =
      cli.add_subcommand("tokenize", "Split text into the WordPiece tokens (and ids) mpt trains BERT with");
  tokenize_cmd->add_option("input", tokenize.input, "A UTF-8 file, one text per line (default: standard input)");
  tokenize_cmd->add_option("--vocab", tokenize.vocab, "WordPiece vocab.txt (data.vocab)")->capture_default_str();
  tokenize_cmd->add_flag("--cased", tokenize.cased, "Keep case and accents (data.lowercase: false)");
  tokenize_cmd->add_flag("--json", tokenize.json, "One JSON object per line: tokens and ids");

  // `mpt help [CMD]`, and an unknown command named with the nearest one, before CLI11 sees them.
  if (argc >= 2 && argv[1][0] != '-') {
    const bool help = std::string(argv[1]) == "help";
    const std::string command = help ? (argc >= 3 ? argv[2] : "") : argv[1];
    if (help && command.empty()) {
      std::cout << cli.help();
      return mpt::kExitOk;
    }
    CLI::App* sub = nullptr;
    for (CLI::App* candidate : cli.get_subcommands([](CLI::App*) { return true; }))
      if (candidate->get_name() == command) sub = candidate;
    if (!sub) {
      std::cerr << "mpt: error: unknown command '" << mpt::echo(command) << "'" << nearest_command(cli, command)
                << "; `mpt --help` lists them\n";
      return mpt::kExitUsage;
    }
    if (help) {
      std::cout << sub->help();
      return mpt::kExitOk;
    }
  }

  // CLI11 reads a bare "++" as the end of a subcommand's arguments and drops it; as an override it is a mistake.
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "++") {
      std::cerr << "mpt: error: override '++': expected key=value (+key=value adds, ++key=value adds or sets, ~key "
                   "deletes), e.g. ++optimizer.lr=3e-4\n";
      return mpt::kExitUsage;
    }
  try {
    cli.parse(argc, argv);
    bench.measure_peak = !no_peak;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return cli.exit(e);  // --help, --version
    CLI::App* command = nullptr;
    for (CLI::App* sub : cli.get_subcommands([](CLI::App*) { return true; }))
      if (argc >= 2 && sub->get_name() == argv[1]) command = sub;
    std::cerr << "mpt: error: " << mpt::terminal_safe(e.what()) << nearest_option(command, argc, argv) << "\n"
              << "Run with --help for more information.\n";
    return mpt::kExitUsage;  // CLI11's own codes (100-115) are not ours
  }

  try {
    if (*train_cmd) return mpt::app::run_train(train);
    if (*ab_cmd) return mpt::app::run_ab_compare(ab);
    if (*nightly_cmd) return mpt::app::run_nightly(nightly);
    if (*bench_cmd) return mpt::app::run_bench(bench);
    if (*keys_cmd) return mpt::app::run_keys(markdown);
    if (*tokenize_cmd) return mpt::app::run_tokenize(tokenize);
    if (*doctor_cmd) return mpt::app::run_doctor();
    if (*export_cmd) return mpt::app::run_export(export_options);
    if (*eval_cmd) return mpt::app::run_eval(eval_spec, eval_overrides, eval_json);
    if (*inspect_cmd) return mpt::app::run_inspect(inspect_spec, inspect_overrides, inspect_json);
  } catch (const mpt::Error& e) {
    std::cerr << "mpt: error: " << mpt::terminal_safe(e.what()) << "\n";
    return e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << "mpt: error: " << mpt::echo(e.path1().string(), 4096) << ": " << e.code().message() << "\n";
    return is_path_mistake(e.code()) ? mpt::kExitUsage : mpt::kExitRunFailed;
  } catch (const c10::Error& e) {
    std::cerr << "mpt: error: LibTorch: " << mpt::terminal_safe(e.what_without_backtrace()) << "\n";
    return mpt::kExitRunFailed;
  } catch (const std::bad_alloc&) {  // a file mpt did not bound, or a model too large for this machine
    std::cerr << "mpt: error: out of memory (std::bad_alloc): a smaller data.batch_size or model may fit\n";
    return mpt::kExitRunFailed;
  } catch (const std::exception& e) {
    std::cerr << "mpt: error: " << mpt::terminal_safe(e.what()) << "\n";
    return mpt::kExitRunFailed;
  }
  return mpt::kExitUsage;
}
