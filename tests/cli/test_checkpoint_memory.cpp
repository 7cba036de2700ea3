// What a job must be given, measured from outside: the peak resident memory of each mpt process, polled from
// /proc/PID/status while it runs, is set by training, not by writing checkpoints (streamed, and under ZeRO-1 each
// rank its own shard), and summary.json says the same per phase.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");

// The 20-million-parameter MLP of the report (784-4096-4096-10) with AdamW: a 240 MB checkpoint, saved every two
// steps.
std::vector<std::string> job(const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train",
                                   kMixed,
                                   "model.hidden_sizes=[4096,4096]",
                                   "optimizer.name=adamw",
                                   "train.max_steps=6",
                                   "checkpoint.every_steps=2",
                                   "data.batch_size=64",
                                   "data.train_limit=4096",
                                   "data.test_limit=200",
                                   "train.progress=plain",
                                   "--run-dir",
                                   dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// max(VmHWM, VmRSS) of a live process in bytes; -1 once it exits (a process tearing down its memory shows VmRSS
// without VmHWM, and counts that are not its run's).
int64_t resident_bytes(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  int64_t hwm = -1, rss = -1;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stoll(line.substr(6)) * 1024;
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stoll(line.substr(6)) * 1024;
  }
  return hwm < 0 || rss < 0 ? -1 : std::max(hwm, rss);
}

std::vector<int> children_of(int pid) {
  std::ifstream list("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<int> children;
  for (int child; list >> child;) children.push_back(child);
  std::sort(children.begin(), children.end());  // started in rank order
  return children;
}

// Starts `args` and polls the peak resident memory of the mpt process, or of each of its ranks when it launches
// some (--nproc), until the run's summary.json is written (what follows is the process's exit, whose static
// destructors page in library code); VmHWM between polls catches the peaks a poll misses.
std::vector<int64_t> run_and_watch(const std::vector<std::string>& args, const std::string& run_dir,
                                   const std::string& log, int ranks) {
  const int pid = start_mpt(args, log);
  std::vector<int> watched = ranks == 1 ? std::vector<int>{pid} : std::vector<int>{};
  std::vector<int64_t> peaks(ranks, 0);
  for (int polls = 0; polls < 300000 && !std::filesystem::exists(run_dir + "/summary.json"); ++polls) {
    if (static_cast<int>(watched.size()) < ranks) watched = children_of(pid);
    bool alive = false;
    for (size_t i = 0; i < watched.size() && i < peaks.size(); ++i)
      if (const int64_t bytes = resident_bytes(watched[i]); bytes >= 0)
        alive = true, peaks[i] = std::max(peaks[i], bytes);
    if (!alive && static_cast<int>(watched.size()) == ranks) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int code = wait_mpt(pid);
  INFO(read_file_text(log));
  REQUIRE(code == 0);
  return peaks;
}

}  // namespace

TEST_CASE("writing checkpoints leaves the process's peak resident memory where training put it",
          "[slow][cli][memory]") {
  const std::string dir = scratch_dir("checkpoint-memory");
  const std::vector<int64_t> peak = run_and_watch(job(dir + "/run", {}), dir + "/run", dir + "/run.log", 1);
  const nlohmann::json memory = read_json(dir + "/run/summary.json")["memory"];
  const double training = memory["resident_peak_bytes"]["training"].get<double>();
  INFO("outside " << peak[0] / 1048576 << " MiB, training " << training / 1048576 << " MiB, checkpoint "
                  << memory["resident_peak_bytes"]["checkpoint"].get<double>() / 1048576 << " MiB");
  CHECK(peak[0] <= 1.15 * training);  // the write of a 240 MB checkpoint doubled it before
  CHECK(memory["resident_peak_bytes"]["checkpoint"].get<double>() <= 1.15 * training);
  CHECK(memory["process_peak_bytes"].get<double>() <= 1.15 * training);
}

TEST_CASE(
    "under ZeRO-1 every rank's peak resident memory stays below its unsharded counterpart's, checkpoints "
    "written",
    "[slow][cli][memory][dist]") {
  const std::string dir = scratch_dir("checkpoint-memory-zero");
  const std::vector<std::string> two = {"precision.strategy=master_weights", "--nproc", "2"};
  std::vector<std::string> plain = two, sharded = two;
  plain.push_back("distributed.shard_optimizer=false");
  sharded.push_back("distributed.shard_optimizer=true");
  const std::vector<int64_t> whole = run_and_watch(job(dir + "/plain", plain), dir + "/plain", dir + "/plain.log", 2);
  const std::vector<int64_t> pieces =
      run_and_watch(job(dir + "/sharded", sharded), dir + "/sharded", dir + "/sharded.log", 2);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": sharded " << pieces[rank] / 1048576 << " MiB, unsharded " << whole[rank] / 1048576
                 << " MiB");
    CHECK(pieces[rank] < whole[rank]);
  }
}
