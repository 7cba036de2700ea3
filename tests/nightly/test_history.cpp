// Nightly building blocks without running jobs: regression rules, the history file, suite validation.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tests/support/helpers.h"
#include "tools/nightly/history.h"
#include "tools/nightly/night.h"
#include "tools/nightly/suite.h"

using namespace mpt::nightly;
using nlohmann::json;

namespace {

json record(const std::string& night, const std::string& status, double samples_per_sec, double accuracy,
            const std::string& job = "mlp") {
  return {{"job", job},
          {"kind", "train"},
          {"night", night},
          {"status", status},
          {"metrics", {{"samples_per_sec", samples_per_sec}, {"accuracy", accuracy}}}};
}

// Judges night after night as mpt nightly does, each night joining the history after it is judged, and counts
// the alarms and the notes.
struct NightlyJudge {
  RegressionRules rules;
  std::vector<json> history;
  int alarms = 0, notes_seen = 0;

  std::vector<std::string> operator()(const json& tonight) {
    std::vector<std::string> notes;
    const auto regressions = find_regressions(tonight, history, rules, &notes);
    alarms += static_cast<int>(regressions.size());
    notes_seen += static_cast<int>(notes.size());
    history.push_back(tonight);
    return regressions;
  }
};

}  // namespace

TEST_CASE("regressions are judged against the median of the last N good nights of the same job", "[fast][nightly]") {
  const std::vector<json> history = {
      record("n1", "ok", 100, 0.90), record("n2", "ok", 50, 0.80),  // n2 falls out
      record("n3", "ok", 100, 0.90), record("n4", "failed", 1, 0.10),        record("n5", "ok", 104, 0.91),
      record("n6", "ok", 98, 0.89),  record("n6", "ok", 1, 0.1, "other job")};
  RegressionRules rules;
  rules.window = 3;  // n3, n5, n6: medians 100 samples/s and 0.90
  CHECK(find_regressions(record("n7", "ok", 94, 0.896), history, rules).empty());  // -6%, -0.4 points
  auto slow = find_regressions(record("n7", "ok", 92, 0.90), history, rules);
  REQUIRE(slow.size() == 1);
  CHECK_THAT(slow[0], Catch::Contains("samples_per_sec 92 is 8.0% below the median 100 of the last 3 good night(s)"));
  auto worse = find_regressions(record("n7", "ok", 100, 0.89), history, rules);
  REQUIRE(worse.size() == 1);
  CHECK_THAT(worse[0], Catch::Contains("accuracy 0.8900 is 1.00 points below the median 0.9000"));
  // Tonight's own record is never its own baseline; no history at all means nothing to compare.
  CHECK(find_regressions(record("n1", "ok", 1, 0.1), {record("n1", "ok", 100, 0.9)}, rules).empty());

  auto diverged = find_regressions(record("n7", "diverged", 0, 0.1), history, rules);
  REQUIRE(diverged.size() == 1);
  CHECK_THAT(diverged[0], Catch::Contains("new divergence"));
  std::vector<json> already = history;
  already.push_back(record("n7", "diverged", 0, 0.1));
  CHECK(find_regressions(record("n8", "diverged", 0, 0.1), already, rules).empty());  // not new
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 2, 3}) == 2.5);
}

TEST_CASE("a busy night's throughput is neither judged nor a baseline, and a quiet night's slowdown still is",
          "[fast][nightly]") {
  auto night = [](int n, double samples_per_sec, double other_cpu) {
    json r = record("n" + std::to_string(100 + n), "ok", samples_per_sec, 0.9);
    r["load"] = {{"other_cpu", other_cpu}};
    return r;
  };
  NightlyJudge judge;  // window 5, 7% throughput drop, 25% of the CPUs used by others
  const double quiet[] = {100, 103, 97, 101, 99, 102, 98, 100, 101, 99};
  for (int n = 0; n < 10; ++n) judge(night(n, quiet[n], 0.02));
  // Ten nights beside a busy neighbour: an OpenMP barrier waiting on a descheduled thread swings throughput wildly.
  const double busy[] = {44, 110, 61, 38, 95, 52, 70, 41, 88, 57};
  for (int n = 10; n < 20; ++n) judge(night(n, busy[n - 10], 0.45));
  CHECK(judge.alarms == 0);
  CHECK(judge.notes_seen == 10);
  // The busy nights are no baseline: a quiet night at the usual speed is fine, a planted 10% slowdown is caught.
  CHECK(judge(night(20, 100, 0.03)).empty());
  const auto slowdown = judge(night(21, 90, 0.03));
  REQUIRE(slowdown.size() == 1);
  CHECK_THAT(slowdown[0], Catch::Contains("10.0% below the median 100 of the last 5 good night(s)"));
}

TEST_CASE(
    "on an always-busy machine a job on the idle cores is judged (no false alarm in ten nights, a planted 10% "
    "slowdown caught), and on every core it is not judged",
    "[fast][nightly]") {
  // Two cores, a neighbour keeping one busy all the time (other_cpu 0.5). The job runs device.threads=1: the
  // neighbour takes none of its core, and its speed is steady (MLP step 3.41-3.43 ms beside a busy loop, against
  // 6.5-6.7 ms and wild swings with 2 threads; docs/performance.md).
  auto night = [](int n, double samples_per_sec, double other_cpu, int threads) {
    json r = record("n" + std::to_string(100 + n), "ok", samples_per_sec, 0.9);
    r["metrics"]["threads"] = threads;
    r["load"] = {{"other_cpu", other_cpu}, {"cpus", 2}};
    return r;
  };
  NightlyJudge judge;  // window 5, 7% throughput drop, 25% of the job's cores taken by others
  // A week on both cores while the machine was quiet: another baseline, never compared with one thread's.
  for (int n = 0; n < 5; ++n) judge(night(n, 140, 0.01, 2));
  const double one_thread[] = {100, 103, 97, 101, 98, 102, 99, 100, 104, 96};
  const double neighbour[] = {0.49, 0.50, 0.52, 0.50, 0.48, 0.51, 0.50, 0.53, 0.49, 0.50};
  for (int n = 0; n < 10; ++n) judge(night(5 + n, one_thread[n], neighbour[n], 1));
  CHECK(judge.alarms == 0);
  CHECK(judge.notes_seen == 0);  // every night judged
  const auto slowdown = judge(night(15, 90, 0.50, 1));
  REQUIRE(slowdown.size() == 1);
  CHECK_THAT(slowdown[0], Catch::Contains("10.0% below the median 100 of the last 5 good night(s)"));

  // The neighbour grows to more than the idle core: it takes part of the job's core, and that night is not judged.
  std::vector<std::string> notes;
  CHECK(find_regressions(night(16, 60, 0.80, 1), judge.history, judge.rules, &notes).empty());
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("other work took 60% of the job's cores"));
  // The same neighbour beside a job on both cores takes half of them: not judged either.
  notes.clear();
  CHECK(find_regressions(night(17, 70, 0.50, 2), judge.history, judge.rules, &notes).empty());
  CHECK(notes.size() == 1);
}

TEST_CASE(
    "a train job timed in bench runs is judged on their median, and on the training run's mean until earlier "
    "nights have one",
    "[fast][nightly]") {
  auto night = [](int n, double training, double bench) {
    json r = record("n" + std::to_string(100 + n), "ok", training, 0.9);
    if (bench > 0) r["metrics"]["bench_samples_per_sec"] = bench;
    return r;
  };
  RegressionRules rules;
  std::vector<json> history = {night(0, 100, 0), night(1, 100, 0)};
  // No earlier bench medians: the training run's mean decides.
  auto first = find_regressions(night(2, 80, 100), history, rules);
  REQUIRE(first.size() == 1);
  CHECK_THAT(first[0], Catch::Contains("samples_per_sec 80 is 20.0% below"));
  for (int n = 3; n < 8; ++n) history.push_back(night(n, 100, 50));
  // A training run 12% slow whose bench median is as usual is no regression; a bench median 10% down is.
  CHECK(find_regressions(night(8, 88, 50.5), history, rules).empty());
  std::string flagged;  // what nightly then times again before calling it
  auto slow = find_regressions(night(9, 100, 45), history, rules, nullptr, &flagged);
  REQUIRE(slow.size() == 1);
  CHECK_THAT(slow[0], Catch::Contains("bench_samples_per_sec 45 is 10.0% below the median 50"));
  CHECK(flagged == "bench_samples_per_sec");
}

TEST_CASE("history.jsonl: appended line by line, a torn last line ignored, a damaged one named", "[fast][nightly]") {
  const std::string dir = mpt::testing::scratch_dir("history");
  const std::string path = dir + "/history.jsonl";
  append_history(path, record("n1", "ok", 1, 0.5));
  append_history(path, record("n2", "ok", 2, 0.6));
  REQUIRE(read_history(path).size() == 2);
  CHECK(read_history(path)[1]["night"] == "n2");
  std::ofstream(path, std::ios::app) << R"({"job": "mlp", "nigh)";  // a crash mid-append
  CHECK(read_history(path).size() == 2);
  append_history(path, record("n3", "ok", 3, 0.7));  // now the torn line is in the middle
  CHECK_THROWS_WITH(read_history(path), Catch::Contains("history.jsonl:3: not a JSON object"));
  CHECK(read_history(dir + "/none.jsonl").empty());
}

TEST_CASE("a bad suite is one usage error listing every problem with file:line", "[fast][nightly]") {
  const std::string dir = mpt::testing::scratch_dir("suite");
  const std::string spec = mpt::testing::source_path("configs/mlp_fmnist_mixed.yaml");
  const std::string path = dir + "/suite.yaml";
  std::ofstream(path) << "suite: s\nkeep_nigths: 3\njobs:\n"
                      << "  - name: a\n    train: " << spec << "\n"
                      << "  - name: a\n    train: missing.yaml\n"
                      << "  - name: b\n    ab_compare: [" << spec << "]\n"
                      << "  - name: c\n    train: " << spec << "\n    time_budget_min: soon\n";
  try {
    load_suite(path);
    FAIL("expected a usage error");
  } catch (const mpt::UsageError& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("suite.yaml:2: unknown suite key 'keep_nigths'"));
    CHECK_THAT(message, Catch::Contains("name: 'a' is used by another job"));
    CHECK_THAT(message, Catch::Contains("no such spec " + dir + "/missing.yaml"));  // relative to the suite
    CHECK_THAT(message, Catch::Contains("ab_compare: expected [A.yaml, B.yaml]"));
    CHECK_THAT(message, Catch::Contains("time_budget_min: expected a number of minutes, got 'soon'"));
  }
  std::ofstream(path) << "suite: good\njobs:\n  - name: a\n    train: " << spec
                      << "\n    overrides: [train.max_steps=5]\n    time_budget_min: 2\n";
  const Suite suite = load_suite(path);
  CHECK(suite.name == "good");
  REQUIRE(suite.jobs.size() == 1);
  CHECK(suite.jobs[0].kind == "train");
  CHECK(suite.jobs[0].time_budget_sec == 120);
  CHECK(suite.jobs[0].overrides == std::vector<std::string>{"train.max_steps=5"});
}

TEST_CASE("retention keeps the newest K nights and never deletes the newest good night", "[fast][nightly]") {
  const std::string root = mpt::testing::scratch_dir("retention");
  auto night = [&](const std::string& name, const std::string& job_status) {
    std::filesystem::create_directories(root + "/" + name);
    std::ofstream(root + "/" + name + "/night.json")
        << json{{"status", "finished"}, {"jobs", {{{"status", job_status}}}}}.dump();
    std::ofstream(root + "/" + name + "/big.bin") << std::string(1 << 20, 'x');  // 1 MiB
  };
  night("2026-01-01_020000", "ok");
  night("2026-01-02_020000", "ok");  // the newest good night
  night("2026-01-03_020000", "failed");
  night("2026-01-04_020000", "failed");
  night("2026-01-05_020000", "failed");
  std::filesystem::create_directories(root + "/not-a-night");  // no night.json: never touched

  const auto deleted = prune_nights(root, "2026-01-05_020000", 2, 0.0);
  CHECK(deleted == std::vector<std::string>{"2026-01-01_020000", "2026-01-03_020000"});
  CHECK(std::filesystem::exists(root + "/2026-01-02_020000"));  // kept beyond K: the newest good one
  CHECK(std::filesystem::exists(root + "/2026-01-04_020000"));
  CHECK(std::filesystem::exists(root + "/not-a-night"));

  // A 2.5 MiB budget over three 1 MiB nights: the oldest deletable goes, the good and the current stay.
  const auto over_budget = prune_nights(root, "2026-01-05_020000", 10, 2.5 / 1024);
  CHECK(over_budget == std::vector<std::string>{"2026-01-04_020000"});
  CHECK(std::filesystem::exists(root + "/2026-01-02_020000"));
  CHECK(std::filesystem::exists(root + "/2026-01-05_020000"));
}

TEST_CASE("a suite naming a spec path too long for the file system is a usage error, not a crash (a fuzz finding)",
          "[fast][nightly]") {
  const std::string dir = mpt::testing::scratch_dir("suite-long-name");
  const std::string too_long(300, 'g');  // one path component over NAME_MAX: stat fails with ENAMETOOLONG
  const std::string path = dir + "/suite.yaml";
  std::ofstream(path) << "suite: s\njobs:\n  - name: a\n    train: " << too_long << ".yaml\n";
  CHECK_THROWS_AS(load_suite(path), mpt::UsageError);
  CHECK_THROWS_WITH(load_suite(path), Catch::Contains("no such spec") && Catch::Contains("too long"));
  CHECK_THROWS_WITH(load_suite(dir + "/" + too_long), Catch::Contains("no such suite file"));
}
