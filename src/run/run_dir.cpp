// Run-directory planning.
#include "run/run_dir.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "common/json.h"
#include "config/load.h"
#include "config/schema.h"
#include "io/checkpoint.h"
#include "tools/mlflow/delivery.h"

namespace mpt::run {
namespace {

namespace fs = std::filesystem;

// The keys whose values differ between the run directory's config.yaml and the spec about to run.
std::vector<std::string> spec_differences(const std::string& config_path, const config::Spec& spec) {
  config::Spec previous = config::parse_spec(read_file(config_path), config_path, {});
  std::vector<std::string> differences;
  for (const auto& d : config::differing_keys(previous, spec)) {
    // A key the earlier config.yaml does not mention was added to mpt after that run was written (each run
    // writes every key); its default then described what that run did.
    if (previous.origin(d.key) == "default") continue;
    if (!config::may_differ_on_resume(d.key))
      differences.push_back(d.key + " (" + d.a_value + " there, " + d.b_value + " now)");
  }
  return differences;
}

// Where the first record (up to byte `end`) with a step past `step` begins, or `end`.
uint64_t first_record_past(const std::string& text, uint64_t end, int64_t step) {
  for (uint64_t begin = 0; begin < end;) {
    const uint64_t stop = std::min<uint64_t>(text.find('\n', begin), end);
    const nlohmann::json record =
        parse_json(text.begin() + static_cast<std::ptrdiff_t>(begin), text.begin() + static_cast<std::ptrdiff_t>(stop));
    if (record.is_object() && record.contains("step") && record["step"].is_number_integer() &&
        record["step"].get<int64_t>() > step)
      return begin;
    begin = stop + 1;
  }
  return end;
}

uint64_t size_of(const std::string& path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  return error ? 0 : size;
}

}  // namespace

RunPlan plan_run(const std::string& dir, const std::string& resume, const config::Spec& spec) {
  RunPlan plan;
  plan.dir = dir;
  const std::string checkpoints = dir + "/checkpoints";
  const bool has_checkpoints = fs::is_directory(checkpoints) && !fs::is_empty(checkpoints);

  if (resume != "auto" && resume != "never") {
    if (std::string problem = io::verify_checkpoint(resume); !problem.empty())
      throw UsageError("--resume " + resume + ": " + problem);
    plan.resume_from = resume;
  } else if (resume == "never" && has_checkpoints) {
    throw UsageError(dir +
                     " already holds checkpoints of an earlier run; pass --resume auto to continue it, "
                     "or choose another --run-dir / experiment.name");
  }

  const std::string config_path = dir + "/config.yaml";
  if (fs::exists(config_path)) {
    auto differences = spec_differences(config_path, spec);
    if (!differences.empty()) {
      std::string message = dir +
                            " holds a run of a different spec; choose another --run-dir or experiment.name. "
                            "Differences:";
      for (const auto& d : differences) message += "\n  " + d;
      throw UsageError(message);
    }
  }

  plan.fall_back = resume == "auto";
  if (resume == "auto" && has_checkpoints) {
    io::CheckpointStore store(checkpoints, 1 << 30);
    plan.resume_from = store.latest_valid(
        [&](const std::string& path, const std::string& why) { plan.rejected.emplace_back(path, why); });
  }
  return plan;
}

void resume_from_plan(train::Checkpointer& checkpointer, train::TrainStep& step, const RunPlan& plan,
                      train::EventLog& events) {
  auto rejected = [&](const std::string& path, const std::string& why) { events.checkpoint_rejected(path, why); };
  for (std::optional<std::string> candidate = plan.resume_from; candidate;) {
    try {
      checkpointer.resume(step, *candidate);
      return;
    } catch (const io::RejectedCheckpoint& e) {
      if (!plan.fall_back) throw UsageError("--resume " + std::string(e.what()));
      rejected(*candidate, e.why());
      const io::CheckpointStore store(plan.dir + "/checkpoints", 1 << 30);
      candidate = store.latest_valid(rejected, io::CheckpointStore::step_of(*candidate));
    }
  }
}

RunDirectory::RunDirectory(const std::string& dir, const std::string& resume, const config::Spec& spec,
                           distributed::Group& group, bool live_progress)
    : dir_(dir) {
  const bool main_rank = group.is_main();
  if (main_rank) {
    made_ = !fs::exists(dir_);
    fs::create_directories(dir_);
    lock_.emplace(dir_, "mpt train");  // a second mpt train on it exits 75 naming this one
  }
  plan_ = plan_run(dir_, resume, spec);
  group.barrier("start-up barrier");                  // every rank has planned from the same directory state
  std::vector<std::pair<std::string, int64_t>> torn;  // JSONL files a crash left mid-line, cut before appending
  if (main_rank) {
    write_file_atomically(dir_ + "/config.yaml", spec.to_yaml());
    for (const char* name : {"/metrics.jsonl", "/events.jsonl"})
      if (const int64_t cut = cut_torn_tail(dir_ + name)) torn.emplace_back(dir_ + name, cut);
  }
  metrics_bytes_ = size_of(dir_ + "/metrics.jsonl"), events_bytes_ = size_of(dir_ + "/events.jsonl");
  const std::string at = main_rank ? dir_ : "";
  logger_ = io::make_logger(main_rank ? dir_ + "/train.log" : "");
  if (!main_rank) logger_->set_level(spdlog::level::err);  // rank 0 reports; the others only their errors
  events_ = std::make_unique<train::EventLog>(main_rank ? dir_ + "/events.jsonl" : "", logger_);
  for (const auto& [path, why] : plan_.rejected) events_->checkpoint_rejected(path, why);
  for (const auto& [path, bytes] : torn) events_->torn_tail_cut(path, bytes);
  metrics_ = std::make_unique<JsonlWriter>(main_rank ? dir_ + "/metrics.jsonl" : "");
  tensorboard_ = std::make_unique<io::TensorBoardWriter>(at);  // a new file per invocation: TensorBoard merges them
  progress_ = std::make_unique<io::Progress>(main_rank && live_progress);
  if (main_rank) checkpoints_.emplace(dir_ + "/checkpoints", spec.get_int("checkpoint.keep_last"));
}

void RunDirectory::rewind_logs(int64_t step) {
  if (!lock_) return;  // rank 0 alone writes the directory
  int64_t records = 0;
  for (auto [writer, opened] :
       {std::pair{metrics_.get(), metrics_bytes_}, std::pair{&events_->jsonl(), events_bytes_}}) {
    const std::string text = read_file(writer->path());
    const uint64_t begin = first_record_past(text, std::min<uint64_t>(opened, text.size()), step);
    if (begin >= opened) continue;
    records += std::count(text.begin() + static_cast<std::ptrdiff_t>(begin),
                          text.begin() + static_cast<std::ptrdiff_t>(opened), '\n');
    mlflow::forget_cut_lines(dir_, fs::path(writer->path()).filename().string(), begin, opened);
    writer->cut(begin, opened);
  }
  if (records > 0)
    logger_->info(
        "resuming at step {}: cut the {} records past it from metrics.jsonl and events.jsonl (training "
        "writes them again)",
        step, records);
}

RunDirectory::~RunDirectory() {
  if (!made_) return;
  std::error_code ignored;
  lock_.reset();
  fs::remove_all(dir_, ignored);
}

}  // namespace mpt::run
