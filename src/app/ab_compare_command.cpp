// `mpt ab-compare A B`: run (or reuse) a baseline and a candidate that differ only in precision, then compare
// them and write compare.json, compare.md and report.html. Each run is a child `mpt train` process, so peak
// memory, threads and a crash belong to that run alone, and an interrupted comparison resumes where it stopped.
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "app/max_batch.h"
#include "common/echo.h"
#include "common/error.h"
#include "common/files.h"
#include "common/process.h"
#include "config/load.h"
#include "config/schema.h"
#include "run/resolve.h"
#include "run/run_dir.h"
#include "run/sections.h"
#include "tools/compare/comparison.h"
#include "tools/compare/report.h"
#include "tools/tracking/tracker.h"

namespace mpt::app {
namespace {

namespace fs = std::filesystem;

volatile std::sig_atomic_t g_interrupted = 0;
void note_interrupt(int) { g_interrupted = 1; }

// Keys that may always differ between A and B: what is being compared, and names and cosmetics.
bool always_allowed(const std::string& key) {
  return key.rfind("precision.", 0) == 0 || key.rfind("tracking.", 0) == 0 || key == "experiment.name" ||
         key == "experiment.output_root" || key == "train.progress" || key == "checkpoint.keep_last";
}

bool allowed_by_user(const std::string& key, const std::vector<std::string>& allow) {
  for (const auto& pattern : allow)
    if (key == pattern || (pattern.back() == '.' && key.rfind(pattern, 0) == 0)) return true;
  return false;
}

void check_allow_list(const std::vector<std::string>& allow) {
  std::vector<std::string> problems;
  for (const auto& key : allow) {
    if (key.empty() || config::find_key(key) || key.back() == '.') continue;
    const std::string near = config::closest_key(key);
    problems.push_back(
        fmt::format("--allow-diff {}: not a spec key{}", key, near.empty() ? "" : "; did you mean " + near + "?"));
  }
  config::throw_if_errors("ab-compare", problems);
}

// Refuses specs that differ in more than precision unless allowed; returns the differences it allowed.
std::vector<std::string> check_differences(const config::Spec& a, const config::Spec& b, const std::string& a_name,
                                           const std::string& b_name, const std::vector<std::string>& allow) {
  std::vector<std::string> allowed, refused;
  for (const auto& d : config::differing_keys(a, b)) {
    const std::string text = fmt::format("{}: {} in A, {} in B", d.key, d.a_value, d.b_value);
    if (always_allowed(d.key)) continue;
    (allowed_by_user(d.key, allow) ? allowed : refused).push_back(text);
  }
  if (!refused.empty()) {
    std::string message = fmt::format(
        "{} and {} differ in more than precision, so their A/B would not isolate "
        "precision:",
        a_name, b_name);
    for (const auto& r : refused) message += "\n  " + r;
    message += "\nmake the specs agree, or allow these keys with --allow-diff KEY[,KEY...]";
    throw UsageError(message);
  }
  return allowed;
}

// One run of the comparison: which spec, which seed, where.
struct PlannedRun {
  std::string side;  // "A" or "B"
  std::string spec_path;
  std::vector<std::string> overrides;
  config::Spec spec;  // resolved, with the repeat's seed applied
  std::string dir;
};

// A run directory already holding a finished run of exactly this spec is reused as it is.
bool finished_with_same_spec(const PlannedRun& run) {
  const std::string summary_path = run.dir + "/summary.json", config_path = run.dir + "/config.yaml";
  if (!fs::exists(summary_path) || !fs::exists(config_path)) return false;
  const auto summary = nlohmann::json::parse(read_file(summary_path), nullptr, false);
  if (summary.is_discarded() || !summary.is_object()) return false;
  const std::string status = summary.value("status", "");
  if (status != "completed" && status != "diverged") return false;
  const config::Spec previous = config::parse_spec(read_file(config_path), config_path, {});
  for (const auto& d : config::differing_keys(previous, run.spec))
    if (d.key != "train.progress") return false;
  return true;
}

// Runs `mpt train` in a child process (output to our terminal; Ctrl-C reaches it directly); returns its exit code.
int run_child_train(const PlannedRun& run) {
  std::vector<std::string> args = {process::self_executable(), "train", run.spec_path};
  args.insert(args.end(), run.overrides.begin(), run.overrides.end());
  args.insert(args.end(), {"--run-dir", run.dir, "--resume", "auto"});
  // A signal to ab-compare alone (kill, a scheduler's SIGTERM) reaches the run as SIGTERM: it checkpoints and stops.
  return process::run_child(args, {}, &g_interrupted).exit_code;
}

std::string run_dir_name(const std::string& side, const config::Spec& spec, int repeat) {
  std::string name = side + "-" + spec.get_string("experiment.name");
  if (repeat > 0) name += fmt::format("-seed{}", spec.get_int("experiment.seed"));
  return name;
}

void write_reports(const std::string& out, const compare::Comparison& comparison, const compare::RunRecord& a,
                   const compare::RunRecord& b) {
  fs::create_directories(out);
  write_file_atomically(out + "/compare.json", compare::to_json(comparison).dump(2) + "\n");
  write_file_atomically(out + "/compare.md", compare::render_markdown(comparison));
  write_file_atomically(out + "/report.html", compare::render_html(comparison, a, b));
}

// The speed-up measured so that a busy machine cannot flip it: rounds of `mpt bench` on both sides back to back,
// alternating which goes first, compared round by round (the training runs ran minutes apart).
compare::SpeedRounds time_both_sides(const AbCompareOptions& options, const std::string& out) {
  compare::SpeedRounds rounds;
  for (int round = 0; round < options.speed_rounds; ++round)
    for (int turn = 0; turn < 2; ++turn) {
      const bool a_side = (round + turn) % 2 == 0;
      const std::string& side = a_side ? options.a : options.b;
      const bool dir = fs::is_directory(side);
      process::ChildOptions child;
      child.log_path = out + "/speed.log";
      std::cerr << fmt::format("ab-compare: timing round {}/{}: {}\n", round + 1, options.speed_rounds,
                               a_side ? "A" : "B");
      const process::BenchResult bench = process::run_bench(
          dir ? side + "/config.yaml" : side, dir ? std::vector<std::string>{} : options.overrides, {"--no-peak"},
          fmt::format("{}/speed-{}-{}.json", out, a_side ? "A" : "B", round), child, &g_interrupted);
      if (g_interrupted)
        throw Error("interrupted while timing both sides; the runs are kept: run the same command again");
      if (!bench.result.contains("samples_per_sec") || !bench.result["samples_per_sec"].is_number())
        throw Error(fmt::format("`mpt bench` of side {} failed (exit {}); see {}/speed.log", a_side ? "A" : "B",
                                bench.child.exit_code, out));
      (a_side ? rounds.a : rounds.b).push_back(bench.result["samples_per_sec"].get<double>());
    }
  return rounds;
}

// Each side's largest batch within the budget, in its own precision: the seed's "memory -> batch" answer.
void find_max_batches(const AbCompareOptions& options, compare::Comparison& comparison) {
  const int64_t budget = options.max_batch_budget_mib * 1024 * 1024;
  nlohmann::json trials = nlohmann::json::array();
  int64_t batches[2] = {0, 0};
  for (int side = 0; side < 2; ++side) {
    const std::string& path = side == 0 ? options.a : options.b;
    const bool dir = fs::is_directory(path);
    const std::string spec_path = dir ? path + "/config.yaml" : path;
    const std::vector<std::string> overrides = dir ? std::vector<std::string>{} : options.overrides;
    const config::Spec spec = run::load_resolved_spec(spec_path, overrides);
    std::cerr << fmt::format("ab-compare: largest batch of side {} within {} MiB\n", side == 0 ? "A" : "B",
                             options.max_batch_budget_mib);
    batches[side] = largest_batch(spec_path, overrides, spec.get_string("precision.mode"),
                                  spec.get_int("data.batch_size"), budget, trials);
  }
  compare::use_max_batch(comparison, budget, batches[0], batches[1]);
}

// The comparison handed to every tracker side A's spec (or a tracker's environment variables) turns on: for
// MLflow, a parent run with the sides as children.
void track_comparison(const AbCompareOptions& options, const std::string& out) {
  const bool dirs = fs::is_directory(options.a);
  const config::Spec spec = run::load_resolved_spec(dirs ? options.a + "/config.yaml" : options.a,
                                                    dirs ? std::vector<std::string>{} : options.overrides);
  const std::string source = "mpt ab-compare " + options.a + " " + options.b;
  for (const auto& tracker : tracking::open_trackers(run::read_sections(spec).tracking, {source}))
    tracker->deliver(out, "comparison",
                     [](const std::string& line) { std::cerr << "ab-compare: " << terminal_safe(line) << "\n"; });
}

int finish(const AbCompareOptions& options, const std::string& out, const std::vector<compare::RunRecord>& a_runs,
           const std::vector<compare::RunRecord>& b_runs, std::vector<std::string> allowed) {
  compare::Thresholds thresholds;
  thresholds.max_accuracy_drop = options.max_accuracy_drop;
  compare::Comparison comparison = compare::compare_runs(a_runs, b_runs, thresholds);
  if (options.speed_rounds > 0) {
    fs::create_directories(out);
    compare::use_speed_rounds(comparison, time_both_sides(options, out));
  }
  if (options.max_batch_budget_mib > 0) find_max_batches(options, comparison);
  comparison.allowed_differences = std::move(allowed);
  write_reports(out, comparison, a_runs.front(), b_runs.front());
  std::cout << compare::render_terminal(comparison)
            << fmt::format("report: {0}/report.html  (also compare.json, compare.md; tensorboard --logdir {0})\n", out);
  track_comparison(options, out);
  return compare::verdict_exit_code(comparison.verdict);
}

int compare_run_dirs(const AbCompareOptions& options) {
  auto spec_of = [](const std::string& dir) {
    const std::string path = dir + "/config.yaml";
    if (!fs::exists(path)) throw UsageError(dir + ": no config.yaml; not an mpt run directory");
    return config::parse_spec(read_file(path), path, {});
  };
  std::vector<std::string> allowed =
      check_differences(spec_of(options.a), spec_of(options.b), options.a, options.b, options.allow_diff);
  std::vector<compare::RunRecord> a_runs{compare::load_run_record(options.a)};
  std::vector<compare::RunRecord> b_runs{compare::load_run_record(options.b)};
  const std::string out =
      options.out.empty()
          ? (fs::path(options.a).parent_path() / ("ab-" + a_runs.front().name + "-vs-" + b_runs.front().name)).string()
          : options.out;
  return finish(options, out, a_runs, b_runs, std::move(allowed));
}

}  // namespace

int run_ab_compare(const AbCompareOptions& options) {
  check_allow_list(options.allow_diff);
  const bool a_is_dir = fs::is_directory(options.a), b_is_dir = fs::is_directory(options.b);
  auto kind = [](const std::string& path) {
    return fs::is_directory(path) ? "a directory" : fs::exists(path) ? "a file" : "missing";
  };
  if (a_is_dir != b_is_dir)
    throw UsageError(
        fmt::format("ab-compare takes two specs or two run directories, not one of each ({} is {}, {} is {})",
                    options.a, kind(options.a), options.b, kind(options.b)));
  if (a_is_dir) {
    if (!options.overrides.empty() || options.repeats != 1)
      throw UsageError("overrides and --repeats need specs; two run directories are compared as they are");
    return compare_run_dirs(options);
  }

  const config::Spec a = run::load_resolved_spec(options.a, options.overrides);
  const config::Spec b = run::load_resolved_spec(options.b, options.overrides);
  std::vector<std::string> allowed = check_differences(a, b, options.a, options.b, options.allow_diff);
  const std::string out = options.out.empty()
                              ? fmt::format("{}/ab-{}-vs-{}", a.get_string("experiment.output_root"),
                                            a.get_string("experiment.name"), b.get_string("experiment.name"))
                              : options.out;

  // Repeat r runs both sides with seed + r; repeat 0 keeps the specs' own seed.
  std::vector<PlannedRun> plan;
  for (int repeat = 0; repeat < options.repeats; ++repeat) {
    for (const auto* side : {&options.a, &options.b}) {
      PlannedRun run;
      run.side = side == &options.a ? "A" : "B";
      run.spec_path = *side;
      run.overrides = options.overrides;
      const config::Spec& base = side == &options.a ? a : b;
      if (repeat > 0)
        run.overrides.push_back(fmt::format("experiment.seed={}", base.get_int("experiment.seed") + repeat));
      run.spec = repeat > 0 ? run::load_resolved_spec(*side, run.overrides) : base;
      run.dir = out + "/" + run_dir_name(run.side, run.spec, repeat);
      plan.push_back(std::move(run));
    }
  }

  struct sigaction action {};
  action.sa_handler = note_interrupt;  // the child checkpoints (Ctrl-C reaches it, or we forward it); we stop after
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::vector<compare::RunRecord> a_runs, b_runs;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRun& run = plan[i];
    if (finished_with_same_spec(run)) {
      std::cerr << fmt::format("ab-compare: [{}/{}] {} {}: reusing the finished run\n", i + 1, plan.size(), run.side,
                               run.dir);
    } else {
      std::cerr << fmt::format("ab-compare: [{}/{}] {} {} -> {}\n", i + 1, plan.size(), run.side, run.spec_path,
                               run.dir);
      const int code = run_child_train(run);
      if (g_interrupted)
        throw Error(fmt::format("interrupted during {}; run the same command again to resume", run.dir));
      if (code == kExitUsage) throw UsageError(fmt::format("`mpt train` refused {} (see its message above)", run.dir));
      if (code == kExitLocked)
        throw Error(fmt::format("{} is in use by another mpt train (see the message above)", run.dir), kExitLocked);
      if (code != kExitOk && !fs::exists(run.dir + "/summary.json"))
        throw Error(fmt::format("`mpt train` for {} failed with exit code {} and left no summary.json", run.dir, code));
    }
    (run.side == "A" ? a_runs : b_runs).push_back(compare::load_run_record(run.dir));
  }
  return finish(options, out, a_runs, b_runs, std::move(allowed));
}

}  // namespace mpt::app
