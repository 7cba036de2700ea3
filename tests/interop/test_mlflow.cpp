// MLflow tracking against a real tracking server (the mlflow package of the tests' environment, SQLite store,
// artifacts proxied), read back with MLflow's own Python client.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <filesystem>
#include <thread>

#include "tests/support/helpers.h"
#include "tools/mlflow/http.h"

using namespace mpt::testing;
namespace fs = std::filesystem;

namespace {

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// `mlflow server` on a loopback port with its store in `dir`; stopped (kill -9) when it goes out of scope.
class TrackingServer {
 public:
  TrackingServer(const std::string& dir, int port) : dir_(dir), port_(port) { start(); }
  ~TrackingServer() { stop(); }
  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void start() {
    pid_ = start_program(
        {python(), "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", std::to_string(port_), "--workers", "1",
         "--backend-store-uri", "sqlite:///" + dir_ + "/mlflow.db", "--artifacts-destination", dir_ + "/artifacts"},
        dir_ + "/server.log");
    for (int second = 0; second < 180; ++second) {  // the first start migrates the SQLite schema
      if (mpt::mlflow::send({"GET", uri() + "/health", "", "text/plain", {}, 1000, 2000}).ok()) return;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    FAIL("mlflow server did not answer /health within 180 s: " << read_file_text(dir_ + "/server.log"));
  }
  void stop() {
    if (pid_ > 0) kill_hard(pid_);
    pid_ = -1;
  }

 private:
  std::string dir_;
  int port_, pid_ = -1;
};

nlohmann::json tracked_runs(const std::string& uri, const std::string& experiment) {
  const CommandResult read =
      run_python(source_path("tests/interop/mlflow_reference.py") + " " + uri + " " + experiment);
  INFO(read.output);
  REQUIRE(read.exit_code == 0);
  return nlohmann::json::parse(read.output.substr(read.output.rfind("{\"runs\"")))["runs"];
}

// Each metrics.jsonl value of `field` at its step equals the run's MLflow history of `key`.
void check_series(const nlohmann::json& run, const std::string& run_dir, const std::string& field,
                  const std::string& key) {
  const auto expected = metric_series(run_dir, field);
  REQUIRE(run["metrics"].contains(key));
  const nlohmann::json& history = run["metrics"][key];
  REQUIRE(history.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(history[i][0].get<int64_t>() == expected[i].first);
    CHECK(history[i][1].get<double>() == Approx(expected[i].second).epsilon(1e-12));
  }
}

const std::vector<std::string> kShortRun = {"train.max_steps=60", "train.log_every_steps=10",
                                            "train.eval_every_steps=30", "data.test_limit=500", "train.progress=plain"};

}  // namespace

TEST_CASE("mlflow: a tracked run's params, every metric step, events, summary and artifacts reach a real server",
          "[slow][interop]") {
  if (const std::string missing = python_missing("mlflow"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("mlflow-run");
  TrackingServer server(dir, free_port());
  std::vector<std::string> args = {"train", source_path("configs/mlp_fmnist_mixed.yaml")};
  args.insert(args.end(), kShortRun.begin(), kShortRun.end());
  args.insert(args.end(), {"debug.inject_nonfinite_grad_at=[15]", "tracking.mlflow.uri=" + server.uri(),
                           "tracking.mlflow.experiment=fmnist", "tracking.mlflow.tags=[team=vision, ticket=ML-42]",
                           "tracking.mlflow.spool=" + dir + "/spool", "--run-dir", dir + "/run"});
  const CommandResult run = run_mpt(args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);

  const nlohmann::json runs = tracked_runs(server.uri(), "fmnist");
  REQUIRE(runs.contains("run"));  // named after the run directory
  const nlohmann::json& tracked = runs["run"];
  CHECK(tracked["status"] == "FINISHED");
  CHECK(tracked["params"]["optimizer.lr"] == "0.001");
  CHECK(tracked["params"]["precision.mode"] == "mixed_bf16");
  CHECK(tracked["params"]["model.hidden_sizes"].get<std::string>().front() == '[');
  CHECK(tracked["tags"]["team"] == "vision");
  CHECK(tracked["tags"]["ticket"] == "ML-42");
  CHECK(tracked["tags"]["mpt.status"] == "completed");
  CHECK(tracked["tags"]["mlflow.source.name"].get<std::string>().find("mpt train") == 0);
  check_series(tracked, dir + "/run", "loss", "train/loss");
  check_series(tracked, dir + "/run", "loss_scale", "train/loss_scale");
  CHECK(tracked["metrics"]["train/loss"].size() == 6u);  // every logged step: 10, 20, ..., 60
  CHECK(tracked["metrics"]["eval/accuracy"].size() == 2u);
  CHECK(tracked["metrics"]["loss_scale/backoff"] == nlohmann::json::parse("[[15, 16384.0]]"));
  CHECK(tracked["metrics"]["events/skip"] == nlohmann::json::parse("[[15, 1.0]]"));
  const nlohmann::json summary = read_json(dir + "/run/summary.json");
  CHECK(tracked["metrics"]["summary/eval/accuracy"][0][1].get<double>() == summary["eval"]["accuracy"].get<double>());
  CHECK(tracked["metrics"]["summary/skipped_steps"][0][1].get<double>() == 1.0);
  for (const char* file : {"config.yaml", "summary.json", "train.log", "metrics.jsonl", "events.jsonl"})
    CHECK(std::count(tracked["artifacts"].begin(), tracked["artifacts"].end(), file) == 1);
  // The artifact is the file itself, byte for byte.
  bool found = false;
  for (const auto& entry : fs::recursive_directory_iterator(dir + "/artifacts"))
    if (entry.path().filename() == "summary.json") {
      found = true;
      CHECK(read_file_text(entry.path().string()) == read_file_text(dir + "/run/summary.json"));
    }
  CHECK(found);
}

TEST_CASE("mlflow: mpt numerics is one run with each format's numbers, its most damaged layers and its report",
          "[slow][interop]") {
  if (const std::string missing = python_missing("mlflow"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("mlflow-numerics");
  TrackingServer server(dir, free_port());
  const CommandResult run = run_mpt({"numerics", source_path("configs/mlp_fmnist_fp8.yaml"), "--batches", "1",
                                     "--formats", "bf16,fp8", "tracking.mlflow.uri=" + server.uri(),
                                     "tracking.mlflow.experiment=numerics", "--out", dir + "/numerics"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json runs = tracked_runs(server.uri(), "numerics");
  REQUIRE(runs.contains("numerics"));
  const nlohmann::json& tracked = runs["numerics"];
  const nlohmann::json report = read_json(dir + "/numerics/numerics.json");
  CHECK(tracked["status"] == "FINISHED");
  CHECK(tracked["tags"]["mpt.kind"] == "numerics");
  CHECK(tracked["tags"]["mpt.most_damaged.fp8"] == "hidden.0");  // the one layer FP8 takes (the head is 10 wide)
  CHECK(tracked["metrics"]["fp8/logits/sqnr_db"][0][1].get<double>() ==
        Approx(report["formats"]["fp8"]["logits"]["sqnr_db"].get<double>()));
  for (const char* file : {"numerics.json", "numerics.html"})
    CHECK(std::count(tracked["artifacts"].begin(), tracked["artifacts"].end(), file) == 1);
}

TEST_CASE("mlflow: an A/B comparison is a parent run holding the verdict and report, its sides child runs",
          "[slow][interop]") {
  if (const std::string missing = python_missing("mlflow"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("mlflow-ab");
  TrackingServer server(dir, free_port());
  std::vector<std::string> args = {"ab-compare", source_path("configs/mlp_fmnist_fp32.yaml"),
                                   source_path("configs/mlp_fmnist_mixed.yaml")};
  args.insert(args.end(), kShortRun.begin(), kShortRun.end());
  args.insert(args.end(), {"tracking.mlflow.uri=" + server.uri(), "tracking.mlflow.experiment=ab",
                           "tracking.mlflow.spool=" + dir + "/spool", "--speed-rounds", "1", "--out", dir + "/ab"});
  const CommandResult run = run_mpt(args);
  INFO(run.output);
  REQUIRE((run.exit_code == 0 || run.exit_code == 3));

  const nlohmann::json runs = tracked_runs(server.uri(), "ab");
  REQUIRE(runs.contains("ab"));
  const nlohmann::json& parent = runs["ab"];
  const nlohmann::json comparison = read_json(dir + "/ab/compare.json");
  CHECK(parent["tags"]["verdict"] == comparison["verdict"]);
  CHECK(parent["metrics"]["accuracy_gap"][0][1].get<double>() == Approx(comparison["accuracy_gap"].get<double>()));
  CHECK(parent["metrics"]["speedup"][0][1].get<double>() == Approx(comparison["speedup"].get<double>()));
  for (const char* file : {"compare.json", "compare.md", "report.html"})
    CHECK(std::count(parent["artifacts"].begin(), parent["artifacts"].end(), file) == 1);
  int children = 0;
  for (const auto& [name, tracked] : runs.items()) {
    if (name == "ab") continue;
    ++children;
    INFO(name);
    CHECK(tracked["tags"]["mlflow.parentRunId"] == parent["id"]);
    CHECK(tracked["status"] == "FINISHED");
    check_series(tracked, dir + "/ab/" + name, "loss", "train/loss");
  }
  CHECK(children == 2);
}

TEST_CASE("mlflow: a server that dies mid-run neither fails nor stalls training, and the next run delivers the spool",
          "[slow][interop]") {
  if (const std::string missing = python_missing("mlflow"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("mlflow-down");
  TrackingServer server(dir, free_port());
  const std::vector<std::string> tracking = {"tracking.mlflow.uri=" + server.uri(), "tracking.mlflow.experiment=down",
                                             "tracking.mlflow.spool=" + dir + "/spool"};
  std::vector<std::string> first = {"train",
                                    source_path("configs/mlp_fmnist_mixed.yaml"),
                                    "train.max_steps=300",
                                    "train.log_every_steps=20",
                                    "data.test_limit=500",
                                    "debug.slow_down=10",
                                    "train.progress=plain",
                                    "--run-dir",
                                    dir + "/first"};
  first.insert(first.end(), tracking.begin(), tracking.end());
  const int pid = start_mpt(first, dir + "/first.log");
  // Once the run exists on the server (mlflow.json written), the server goes away for the rest of the run.
  for (int i = 0; i < 600 && !fs::exists(dir + "/first/mlflow.json"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(fs::exists(dir + "/first/mlflow.json"));
  server.stop();
  REQUIRE(wait_mpt(pid) == 0);
  // Bounded retries: the process ends seconds after its summary, whatever the server does.
  const auto summary_written = std::chrono::file_clock::to_sys(fs::last_write_time(dir + "/first/summary.json"));
  const double seconds_after =
      std::chrono::duration<double>(std::chrono::system_clock::now() - summary_written).count();
  const std::string log = read_file_text(dir + "/first.log");
  INFO(log);
  CHECK(read_json(dir + "/first/summary.json")["status"] == "completed");
  CHECK(log.find("is not answering") != std::string::npos);
  CHECK(seconds_after < 30.0);
  REQUIRE(std::distance(fs::directory_iterator(dir + "/spool"), fs::directory_iterator()) == 1);

  server.start();  // back, same store: the next tracked command delivers what waited
  std::vector<std::string> second = {"train",
                                     source_path("configs/mlp_fmnist_mixed.yaml"),
                                     "train.max_steps=20",
                                     "data.test_limit=500",
                                     "train.progress=plain",
                                     "--run-dir",
                                     dir + "/second"};
  second.insert(second.end(), tracking.begin(), tracking.end());
  const CommandResult run = run_mpt(second);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("delivered 1 spooled directory") != std::string::npos);
  CHECK(fs::is_empty(dir + "/spool"));
  const nlohmann::json runs = tracked_runs(server.uri(), "down");
  REQUIRE(runs.contains("first"));
  REQUIRE(runs.contains("second"));
  CHECK(runs["first"]["status"] == "FINISHED");
  // Finished later from the spool, it keeps the times it ran at, not the time it was delivered.
  const nlohmann::json first_summary = read_json(dir + "/first/summary.json");
  const auto started = static_cast<int64_t>(first_summary["started_at"].get<double>() * 1000);
  CHECK(std::abs(runs["first"]["start_time"].get<int64_t>() - started) < 5000);
  CHECK(runs["first"]["end_time"] == static_cast<int64_t>(first_summary["ended_at"].get<double>() * 1000));
  check_series(runs["first"], dir + "/first", "loss", "train/loss");  // every step once, none lost or repeated
  CHECK(runs["first"]["metrics"]["train/loss"].size() == 15u);
  CHECK(std::count(runs["first"]["artifacts"].begin(), runs["first"]["artifacts"].end(), "summary.json") == 1);
}

TEST_CASE(
    "mlflow: a run killed off its checkpoint and resumed holds each step once, with the uninterrupted run's "
    "values, at the times they were logged",
    "[slow][interop]") {
  if (const std::string missing = python_missing("mlflow"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("mlflow-resume");
  TrackingServer server(dir, free_port());
  const auto args = [&](const std::string& run_dir, const std::string& slow_down) {
    return std::vector<std::string>{"train",
                                    source_path("configs/mlp_fmnist_mixed.yaml"),
                                    "train.max_steps=120",
                                    "data.batch_size=2048",
                                    "train.log_every_steps=10",
                                    "train.eval_every_steps=60",
                                    "checkpoint.every_steps=75",
                                    "data.test_limit=500",
                                    "train.progress=plain",
                                    "debug.slow_down=" + slow_down,
                                    "tracking.mlflow.uri=" + server.uri(),
                                    "tracking.mlflow.experiment=resume",
                                    "tracking.mlflow.spool=" + dir + "/spool",
                                    "--run-dir",
                                    run_dir};
  };
  // USER and LOGNAME unset: MLflow's client then names the account, and so does mpt.
  const CommandResult whole = run_mpt_with_env("-u USER -u LOGNAME", args(dir + "/whole", "0"));
  INFO(whole.output);
  REQUIRE(whole.exit_code == 0);
  // Slow enough for the tracker (every 10 s) to send steps past the checkpoint at 75 before the kill at 110.
  const int pid = start_mpt(args(dir + "/killed", "10"), dir + "/killed.log");
  const auto logged_step = [&] {
    const std::string text =
        fs::exists(dir + "/killed/metrics.jsonl") ? read_file_text(dir + "/killed/metrics.jsonl") : "";
    return std::count(text.begin(), text.end(), '\n') == 0
               ? 0
               : read_jsonl(dir + "/killed/metrics.jsonl").back().value("step", 0);
  };
  for (int i = 0; i < 3000 && logged_step() < 110; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill_hard(pid);
  REQUIRE(logged_step() >= 110);
  const auto first_logged =
      static_cast<int64_t>(read_jsonl(dir + "/killed/metrics.jsonl").front()["time"].get<double>() * 1000);
  const CommandResult resumed = run_mpt(args(dir + "/killed", "0"));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed from") && Catch::Contains("step-000000075.mpt"));

  const nlohmann::json runs = tracked_runs(server.uri(), "resume");
  REQUIRE(runs.contains("whole"));
  REQUIRE(runs.contains("killed"));
  const nlohmann::json &a = runs["whole"], &b = runs["killed"];
  for (const char* key : {"train/loss", "train/accuracy", "train/lr", "train/loss_scale", "eval/loss", "eval/accuracy",
                          "events/checkpoint"}) {
    INFO(key);
    CHECK(b["metrics"][key] == a["metrics"][key]);  // every step once, each with the uninterrupted value
  }
  CHECK(b["metrics"]["train/loss"].size() == 12u);
  CHECK(b["metrics"]["events/resume"] == nlohmann::json::parse("[[75, 1.0]]"));
  // Each point at the time it was logged: as many times as points, rising with the steps.
  const nlohmann::json& times = b["timestamps"]["train/loss"];
  for (size_t i = 1; i < times.size(); ++i) CHECK(times[i].get<int64_t>() > times[i - 1].get<int64_t>());
  CHECK(b["start_time"].get<int64_t>() <= first_logged);  // the first invocation's start, not the resume's
  CHECK(b["start_time"].get<int64_t>() > first_logged - 60000);
  const nlohmann::json summary = read_json(dir + "/killed/summary.json");
  CHECK(b["end_time"] == static_cast<int64_t>(summary["ended_at"].get<double>() * 1000));
  CHECK(std::string(a["tags"]["mlflow.source.git.commit"]).size() == 40u);
  CHECK(a["tags"]["mlflow.user"] != "unknown");
  CHECK(a["tags"]["mlflow.user"] == std::string(getpwuid(getuid())->pw_name));
}

TEST_CASE("mlflow: a night is a parent run with its jobs as children, an A/B job's sides below its comparison",
          "[slow][interop][nightly]") {
  if (const std::string missing = python_missing("mlflow"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("mlflow-night");
  TrackingServer server(dir, free_port());
  const std::string tiny = "[train.max_steps=30, data.train_limit=4096, data.test_limit=500, device.threads=1]";
  std::ofstream(dir + "/suite.yaml") << "suite: nightly_test\nregression:\n  speed_rounds: 0\nmlflow:\n  uri: "
                                     << server.uri() << "\n  experiment: nights\n  spool: " << dir << "/spool\n"
                                     << "jobs:\n  - name: mixed\n    train: "
                                     << source_path("configs/mlp_fmnist_mixed.yaml") << "\n    overrides: " << tiny
                                     << "\n  - name: ab\n    ab_compare: ["
                                     << source_path("configs/mlp_fmnist_fp32.yaml") << ", "
                                     << source_path("configs/mlp_fmnist_mixed.yaml") << "]\n    overrides: " << tiny
                                     << "\n";
  const CommandResult night = run_mpt({"nightly", dir + "/suite.yaml", "--root", dir + "/root"});
  INFO(night.output);
  REQUIRE((night.exit_code == 0 || night.exit_code == 3));
  CHECK_THAT(night.output, Catch::Contains("nightly: mlflow: ") && Catch::Contains("tracked at " + server.uri()));

  const nlohmann::json runs = tracked_runs(server.uri(), "nights");
  std::string night_name;
  for (const auto& [name, tracked] : runs.items())
    if (name.rfind("nightly_test ", 0) == 0) night_name = name;
  REQUIRE(!night_name.empty());
  const nlohmann::json& parent = runs[night_name];
  CHECK(parent["tags"]["mpt.job.mixed"] == "ok");
  CHECK(parent["tags"]["mpt.job.ab"] == "ok");
  CHECK(parent["metrics"].contains("regressions"));
  CHECK(parent["metrics"]["mixed/steps"][0][1] == 30.0);
  CHECK(std::count(parent["artifacts"].begin(), parent["artifacts"].end(), "summary.md") == 1);
  const std::string night_id = night_name.substr(std::string("nightly_test ").size());
  REQUIRE(runs.contains(night_id + " mixed"));
  REQUIRE(runs.contains(night_id + " ab"));
  CHECK(runs[night_id + " mixed"]["tags"]["mlflow.parentRunId"] == parent["id"]);
  const nlohmann::json& comparison = runs[night_id + " ab"];
  CHECK(comparison["tags"]["mlflow.parentRunId"] == parent["id"]);
  int sides = 0;
  for (const auto& [name, tracked] : runs.items())
    if (tracked["tags"].value("mlflow.parentRunId", "") == comparison["id"]) ++sides;
  CHECK(sides == 2);
}
