// `mpt nightly` end to end, and the reliability it promises: one night at a time, a failing job does not stop
// the others, regressions, recovery after a power cut, kill -9 during training, a full disk.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "io/checkpoint.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;
namespace fs = std::filesystem;

namespace {

const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");
const std::string kFp32 = source_path("configs/mlp_fmnist_fp32.yaml");
const std::string kTiny = "[train.max_steps=40, data.train_limit=4096, data.test_limit=500, train.log_every_steps=10]";

std::string write_suite(const std::string& dir, const std::string& jobs, const std::string& settings = "") {
  const std::string path = dir + "/suite.yaml";
  std::ofstream(path) << "suite: test\n" << settings << "jobs:\n" << jobs;
  return path;
}

std::string train_job(const std::string& name, const std::string& overrides = kTiny) {
  return "  - name: " + name + "\n    train: " + kMixed + "\n    overrides: " + overrides + "\n";
}

void sleep_for(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

}  // namespace

TEST_CASE("a night runs every job in order, records history, and a failing job does not stop the others",
          "[slow][cli][nightly]") {
  const std::string dir = scratch_dir("nightly-basic");
  const std::string suite = write_suite(
      dir, train_job("first") + "  - name: broken\n    train: " + kMixed + "\n    overrides: [data.train_limit=-1]\n" +
               "  - name: ab\n    ab_compare: [" + kFp32 + ", " + kMixed + "]\n    overrides: " + kTiny + "\n");
  CommandResult night = run_mpt({"nightly", suite, "--root", dir + "/root"});
  INFO(night.output);
  CHECK(night.exit_code == 1);  // a job failed
  CHECK(night.output.find('\033') == std::string::npos);
  CHECK_THAT(night.output, Catch::Contains("3 job(s), 1 failed"));
  CHECK_THAT(night.output, Catch::Contains("data.train_limit"));  // the failing job's reason, in one line

  const auto history = read_jsonl(dir + "/root/history.jsonl");
  REQUIRE(history.size() == 3);
  CHECK(history[0]["job"] == "first");
  CHECK(history[0]["status"] == "ok");
  CHECK(history[0]["metrics"]["steps"] == 40);
  CHECK(history[0]["metrics"]["bench_rounds"].size() == 3);  // timed again in 3 runs of mpt bench
  CHECK(history[0]["metrics"]["bench_samples_per_sec"].get<double>() > 0);
  CHECK(history[0]["metrics"]["threads"].get<int>() >= 1);
  CHECK(history[0]["metrics"]["peak_memory_bytes"].get<int64_t>() > 0);
  CHECK(history[0]["metrics"]["checkpoint_peak_memory_bytes"].is_number());
  CHECK(history[0]["versions"]["git"].is_string());
  CHECK(history[1]["status"] == "failed");
  CHECK(history[2]["job"] == "ab");
  CHECK(history[2]["metrics"]["verdict"].is_string());

  const fs::path latest = dir + "/root/latest";
  REQUIRE(fs::is_symlink(latest));
  const nlohmann::json summary = read_json((latest / "summary.json").string());
  CHECK(summary["failed"] == 1);
  CHECK(summary["exit_code"] == 1);
  CHECK(read_json((latest / "night.json").string())["status"] == "finished");
  CHECK(fs::exists(latest / "first" / "checkpoints"));
  CHECK(fs::exists(latest / "ab" / "report.html"));
  CHECK(fs::exists(latest / "summary.md"));
  const std::string trends = read_file_text(dir + "/root/trends.html");
  CHECK(markup_problem(trends).empty());
  CHECK_THAT(trends, Catch::Contains("<svg id=\"job0-accuracy\""));
  CHECK_THAT(trends, Catch::Contains("<svg id=\"job2-speedup\""));
}

TEST_CASE("a night slower or less accurate than the usual nights is a regression: exit 3", "[slow][cli][nightly]") {
  const std::string dir = scratch_dir("nightly-regression");
  fs::create_directories(dir + "/root");
  {
    std::ofstream history(dir + "/root/history.jsonl");
    for (int n = 1; n <= 3; ++n)
      history << nlohmann::json{{"job", "tiny"},
                                {"kind", "train"},
                                {"night", "2026-01-0" + std::to_string(n)},
                                {"status", "ok"},
                                {"metrics", {{"samples_per_sec", 1e9}, {"accuracy", 0.99}}}}
                     .dump()
              << "\n";
  }
  // Judged whatever else this machine runs meanwhile (parallel tests): the rule for busy nights has its own test.
  const std::string suite = write_suite(dir, train_job("tiny"), "regression:\n  max_other_cpu: 1.0\n");
  CommandResult night = run_mpt({"nightly", suite, "--root", dir + "/root"});
  INFO(night.output);
  CHECK(night.exit_code == 3);
  CHECK_THAT(night.output, Catch::Contains("REGRESSION tiny: samples_per_sec"));
  CHECK_THAT(night.output, Catch::Contains("REGRESSION tiny: accuracy"));
  const nlohmann::json summary = read_json(dir + "/root/latest/summary.json");
  CHECK(summary["regressions"].size() == 2);
  const nlohmann::json last = read_jsonl(dir + "/root/history.jsonl").back();
  CHECK(last["regressions"].size() == 2);
  CHECK(last["load"]["other_cpu"].is_number());  // the machine's load during the job is recorded
  CHECK(last["load"]["cpus"].get<int>() >= 1);
}

TEST_CASE("one night at a time: a held lock exits 75 naming the holder, and of two at once exactly one runs",
          "[slow][cli][nightly]") {
  const std::string dir = scratch_dir("nightly-lock");
  const std::string root = dir + "/root";
  fs::create_directories(root);
  const std::string suite =
      write_suite(dir, train_job("tiny", "[train.max_steps=300, data.train_limit=8192, data.test_limit=500]"));
  {
    const int fd = open((root + "/.lock").c_str(), O_RDWR | O_CREAT, 0644);
    REQUIRE(flock(fd, LOCK_EX | LOCK_NB) == 0);
    REQUIRE(write(fd, "pid 4242 on the test\n", 21) == 21);
    CommandResult locked = run_mpt({"nightly", suite, "--root", root});
    CHECK(locked.exit_code == 75);
    CHECK_THAT(locked.output, Catch::Contains("pid 4242 on the test"));
    close(fd);  // the holder goes away: the lock is free again, no stale file to clean up
  }
  auto first = std::async(std::launch::async, [&] { return run_mpt({"nightly", suite, "--root", root}); });
  sleep_for(0.3);
  auto second = std::async(std::launch::async, [&] { return run_mpt({"nightly", suite, "--root", root}); });
  const CommandResult a = first.get(), b = second.get();
  INFO(a.output << "\n----\n" << b.output);
  CHECK(((a.exit_code == 0 && b.exit_code == 75) || (a.exit_code == 75 && b.exit_code == 0)));
  CHECK(read_jsonl(root + "/history.jsonl").size() == 1);
}

TEST_CASE("after a power cut mid-night, the next invocation resumes the unfinished job before a new night",
          "[slow][cli][nightly]") {
  const std::string dir = scratch_dir("nightly-recovery");
  const std::string root = dir + "/root";
  const std::string suite =
      write_suite(dir,
                  train_job("long",
                            "[train.max_steps=3000, data.train_limit=16384, data.test_limit=500, "
                            "checkpoint.every_steps=100, train.log_every_steps=100]"),
                  // Two nights minutes apart on a shared machine differ in speed by more than the default 7%.
                  "regression:\n  throughput_drop: 0.9\n");
  const int pid = start_mpt({"nightly", suite, "--root", root}, dir + "/first.log");
  // Wait until the job has checkpointed, then cut the power (SIGKILL to the nightly and its training child).
  for (int i = 0; i < 600 && !fs::exists(root + "/latest/long/checkpoints/step-000000300.mpt"); ++i) sleep_for(0.05);
  kill_hard(pid);
  const std::string killed_night = fs::read_symlink(root + "/latest").string();
  REQUIRE(read_json(root + "/" + killed_night + "/night.json")["status"] == "running");
  CHECK_FALSE(fs::exists(root + "/history.jsonl"));

  CommandResult next = run_mpt({"nightly", suite, "--root", root});
  INFO(next.output);
  CHECK(next.exit_code == 0);
  CHECK_THAT(next.output, Catch::Contains("recovered " + killed_night + " long: ok"));
  const auto history = read_jsonl(root + "/history.jsonl");
  REQUIRE(history.size() == 2);
  CHECK(history[0]["night"] == killed_night);
  CHECK(history[0]["recovered"] == true);
  CHECK(history[0]["metrics"]["steps"] == 3000);
  CHECK(history[1]["recovered"] == false);
  CHECK(read_json(root + "/" + killed_night + "/night.json")["status"] == "recovered");
  CHECK_THAT(read_file_text(root + "/" + killed_night + "/long/train.log"), Catch::Contains("resumed from"));
}

TEST_CASE("kill -9 at random moments, then resume: never a corrupt checkpoint, losses bit-exact",
          "[slow][cli][nightly]") {
  const std::string dir = scratch_dir("kill9");
  const std::vector<std::string> spec = {"train",
                                         kMixed,
                                         "train.max_steps=600",
                                         "data.train_limit=16384",
                                         "data.test_limit=500",
                                         "train.log_every_steps=1",
                                         "checkpoint.every_steps=5",
                                         "checkpoint.keep_last=2"};
  auto args = [&](const std::string& run) {
    std::vector<std::string> a = spec;
    a.insert(a.end(), {"--run-dir", dir + "/" + run});
    return a;
  };
  CommandResult reference = run_mpt(args("reference"));
  REQUIRE(reference.exit_code == 0);

  std::srand(static_cast<unsigned>(std::time(nullptr)));
  for (int kill_number = 0; kill_number < 3; ++kill_number) {
    const int pid = start_mpt(args("killed"), dir + "/kill.log");
    const std::string metrics = dir + "/killed/metrics.jsonl";
    const size_t lines_before = fs::exists(metrics) ? read_jsonl(metrics).size() : 0;
    // Some random moment after training (re)started: during a step or during one of the frequent checkpoints.
    for (int i = 0; i < 400 && (!fs::exists(metrics) || read_jsonl(metrics).size() < lines_before + 20); ++i)
      sleep_for(0.02);
    sleep_for(0.001 * (std::rand() % 200));
    kill_hard(pid);
    // The newest checkpoint that verifies is at most one interval behind the last step logged.
    mpt::io::CheckpointStore store(dir + "/killed/checkpoints", 2);
    int64_t last_logged = 0;
    for (const auto& line : read_jsonl(metrics)) last_logged = std::max(last_logged, line["step"].get<int64_t>());
    if (last_logged >= 600) break;
    const auto latest = store.latest_valid([](const std::string&, const std::string&) {});
    REQUIRE(latest.has_value());
    const int64_t checkpoint_step = std::stoll(fs::path(*latest).stem().string().substr(5));
    CHECK(last_logged - checkpoint_step < 5 + 1);
  }
  CommandResult finish = run_mpt(args("killed"));
  INFO(finish.output);
  REQUIRE(finish.exit_code == 0);
  CHECK(read_json(dir + "/killed/summary.json")["steps"] == 600);

  auto losses = [](const std::string& run_dir) {
    std::map<int64_t, double> by_step;  // the last record of a step wins (re-run steps after a resume)
    for (const auto& line : read_jsonl(run_dir + "/metrics.jsonl"))
      if (line["kind"] == "train") by_step[line["step"].get<int64_t>()] = line["loss"].get<double>();
    return by_step;
  };
  const auto expected = losses(dir + "/reference"), got = losses(dir + "/killed");
  REQUIRE(expected.size() == 600);
  CHECK(got == expected);  // bit-exact
}

TEST_CASE("a full disk during a checkpoint or a history append leaves the previous state intact",
          "[slow][cli][nightly]") {
  const std::string dir = scratch_dir("disk-full");
  const std::vector<std::string> train = {"train",     kMixed,      "data.train_limit=4096", "data.test_limit=500",
                                          "--run-dir", dir + "/run"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = train;
    a.insert(a.begin() + 2, extra.begin(), extra.end());
    return a;
  };
  REQUIRE(run_mpt(with({"train.max_steps=20"})).exit_code == 0);
  // A checkpoint is ~4.8 MB; with a 1 MiB file limit the next one cannot be written.
  CommandResult full = run_mpt_with_file_limit(with({"train.max_steps=40"}), 1024);
  INFO(full.output);
  CHECK(full.exit_code == 1);
  CHECK_THAT(full.output, Catch::Contains("File too large"));
  CHECK_THAT(full.output, Catch::Contains("step-000000040.mpt"));
  for (const auto& entry : fs::directory_iterator(dir + "/run/checkpoints"))
    CHECK(entry.path().filename().string().find("tmp") == std::string::npos);  // no half-written file left
  CHECK(mpt::io::verify_checkpoint(dir + "/run/checkpoints/step-000000020.mpt").empty());
  CommandResult resumed = run_mpt(with({"train.max_steps=40"}));
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(read_file_text(dir + "/run/train.log"), Catch::Contains("step-000000020.mpt at step 20"));

  // The history: filled to the limit, the append fails and the file is exactly as it was.
  const std::string root = dir + "/root";
  fs::create_directories(root);
  {
    std::ofstream history(root + "/history.jsonl");
    // Exactly 64 KiB of records, so that the file-size limit leaves no room for one more byte.
    const std::string line = nlohmann::json{{"job", "other"}, {"night", "x"}, {"status", "ok"}}.dump();
    size_t size = 0;
    for (; size + 2 * (line.size() + 1) <= 64 * 1024; size += line.size() + 1) history << line << "\n";
    nlohmann::json pad = {{"job", "other"}, {"night", "x"}, {"status", "ok"}, {"pad", ""}};
    pad["pad"] = std::string(64 * 1024 - size - pad.dump().size() - 1, 'x');
    history << pad.dump() << "\n";
  }
  const std::string before = read_file_text(root + "/history.jsonl");
  REQUIRE(before.size() == 64 * 1024);
  CommandResult night = run_mpt_with_file_limit({"nightly", write_suite(dir, train_job("tiny")), "--root", root}, 64);
  INFO(night.output);
  CHECK(night.exit_code == 1);
  CHECK_THAT(night.output, Catch::Contains("history.jsonl"));
  CHECK_THAT(night.output, Catch::Contains("the history is as it was before"));
  CHECK(read_file_text(root + "/history.jsonl") == before);
}

TEST_CASE("a job over its time budget is stopped with a checkpoint and reported as timeout, and the rest run",
          "[slow][cli][nightly]") {
  const std::string dir = scratch_dir("nightly-budget");
  const std::string suite =
      write_suite(dir, "  - name: endless\n    train: " + kMixed +
                           "\n    overrides: [train.epochs=1000, data.train_limit=8192, data.test_limit=500]\n"
                           "    time_budget_min: 0.05\n" +
                           train_job("after"));
  CommandResult night = run_mpt({"nightly", suite, "--root", dir + "/root"});
  INFO(night.output);
  CHECK(night.exit_code == 1);
  const auto history = read_jsonl(dir + "/root/history.jsonl");
  REQUIRE(history.size() == 2);
  CHECK(history[0]["status"] == "timeout");
  CHECK(history[0]["seconds"].get<double>() < 30);
  CHECK_THAT(history[0]["reason"].get<std::string>(), Catch::Contains("time budget of 3 s"));
  CHECK(read_json(dir + "/root/latest/endless/summary.json")["status"] == "interrupted");  // SIGTERM: checkpointed
  CHECK_FALSE(fs::is_empty(dir + "/root/latest/endless/checkpoints"));
  CHECK(history[1]["status"] == "ok");
}
