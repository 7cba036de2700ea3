// What a run directory's files become in MLflow, and the tracker's refusals, without a server.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "config/schema.h"
#include "tests/support/fake_server.h"
#include "tests/support/helpers.h"
#include "tools/mlflow/spool.h"
#include "tools/mlflow/tracker.h"
#include "tools/mlflow/http.h"
#include "tools/mlflow/run_files.h"

using namespace mpt;
using namespace mpt::mlflow;

namespace {

std::map<std::string, double> by_key(const std::vector<Metric>& metrics) {
  std::map<std::string, double> out;
  for (const auto& m : metrics) out[m.key] = m.value;
  return out;
}

}  // namespace

TEST_CASE("mlflow params are the resolved spec's leaves, lists in flow style", "[fast][mlflow]") {
  const KeyValues params = params_from_config(
      "optimizer:\n  lr: 0.001\nmodel:\n  hidden_sizes: [64, 32]\n"
      "  name: mlp\nexperiment:\n  name: \"\"\n");
  const std::map<std::string, std::string> map(params.begin(), params.end());
  CHECK(map.at("optimizer.lr") == "0.001");
  CHECK(map.at("model.hidden_sizes") == "[64, 32]");
  CHECK(map.at("model.name") == "mlp");
  CHECK(map.at("experiment.name").empty());
  CHECK(params.size() == 4u);
}

TEST_CASE("mlflow metrics: train and eval lines by kind, nested values by path, at their step", "[fast][mlflow]") {
  const auto train = metrics_from_record(
      nlohmann::json::parse(R"({"kind":"train","step":50,"loss":0.5,"lr":0.001,"fp8":{"input_scale":[2.0,4.0]}})"), 7);
  const auto values = by_key(train);
  CHECK(values.at("train/loss") == 0.5);
  CHECK(values.at("train/fp8/input_scale/1") == 4.0);
  CHECK(values.count("train/step") == 0);
  CHECK(values.count("train/kind") == 0);
  for (const auto& m : train) CHECK((m.step == 50 && m.timestamp_ms == 7));
  const auto eval = by_key(metrics_from_record(
      nlohmann::json::parse(R"({"kind":"eval","step":100,"eval":{"loss":0.4,"accuracy":0.9}})"), 0));
  CHECK(eval == std::map<std::string, double>{{"eval/accuracy", 0.9}, {"eval/loss", 0.4}});
  CHECK(metrics_from_record(nlohmann::json::parse(R"({"kind":"train","loss":1})"), 0).empty());  // no step
}

TEST_CASE("mlflow events: loss-scale changes as the new scale, FP8 scales per tensor, a running count per kind",
          "[fast][mlflow]") {
  std::map<std::string, int64_t> counts;
  auto event = [&](const char* text) { return by_key(metrics_from_event(nlohmann::json::parse(text), counts)); };
  CHECK(event(R"({"kind":"backoff","step":15,"old_scale":32768,"new_scale":16384})") ==
        std::map<std::string, double>{{"events/backoff", 1}, {"loss_scale/backoff", 16384}});
  CHECK(event(R"({"kind":"backoff","step":30,"new_scale":8192})").at("events/backoff") == 2);
  CHECK(event(R"({"kind":"fp8_scale","step":50,"tensor":"hidden.0.input","scale":221.5,"amax":2.0,"saturated":0})") ==
        std::map<std::string, double>{{"fp8/hidden.0.input/amax", 2.0},
                                      {"fp8/hidden.0.input/saturated", 0},
                                      {"fp8/hidden.0.input/scale", 221.5}});
  CHECK(event(R"({"kind":"checkpoint","step":60,"path":"x"})").at("events/checkpoint") == 1);
  CHECK(event(R"({"no":"kind"})").empty());
}

TEST_CASE("mlflow summary: numbers as metrics at the last step, text as tags, the status MLflow's", "[fast][mlflow]") {
  const SummaryEntities done = from_summary(
      nlohmann::json::parse(R"({"status":"completed","steps":200,"eval":{"accuracy":0.82},"versions":{"git":"abc"}})"),
      0);
  CHECK(done.status == "FINISHED");
  REQUIRE(done.metrics.size() == 2u);  // steps and eval/accuracy
  for (const auto& m : done.metrics) CHECK(m.step == 200);
  const std::map<std::string, std::string> tags(done.tags.begin(), done.tags.end());
  CHECK(tags.at("mpt.status") == "completed");
  CHECK(tags.at("mpt.versions.git") == "abc");
  CHECK(from_summary(nlohmann::json::parse(R"({"status":"interrupted"})"), 0).status == "KILLED");
  CHECK(from_summary(nlohmann::json::parse(R"({"status":"diverged"})"), 0).status == "FAILED");
}

TEST_CASE("mlflow reads only the complete lines of a growing JSONL file, each once", "[fast][mlflow]") {
  const std::string path = testing::scratch_dir("mlflow-lines") + "/metrics.jsonl";
  std::ofstream(path) << "{\"step\":1}\n{\"step\":2}\n{\"st";
  uint64_t offset = 0;
  CHECK(read_new_lines(path, offset).size() == 2u);
  CHECK(read_new_lines(path, offset).empty());
  std::ofstream(path, std::ios::app) << "ep\":3}\nnot json\n";
  const auto later = read_new_lines(path, offset);
  REQUIRE(later.size() == 1u);  // the torn line completed; the malformed one skipped
  CHECK(later[0]["step"] == 3);
  CHECK(offset == std::filesystem::file_size(path));
}

namespace {

// The tracking.mlflow keys as a spec gives them to the tracker.
struct Section {
  std::string uri, experiment;
  std::vector<std::string> tags;
  keys::Options values() const {
    keys::Options options;
    options.set("tracking.mlflow.uri", uri);
    options.set("tracking.mlflow.experiment", experiment);
    options.set("tracking.mlflow.tags", tags);
    return options;
  }
};

std::optional<Target> target_of(const Section& section, const std::string& where = "tracking.") {
  return read_target(section.values(), {"mpt train x.yaml", where});
}

}  // namespace

TEST_CASE("mlflow target: the spec's keys over MLflow's variables, and clear refusals", "[fast][mlflow]") {
  Section section;
  section.uri = "http://tracker:5000";
  section.tags = {"team=vision", "empty="};
  const auto target = target_of(section);
  REQUIRE(target);
  CHECK(target->experiment ==
        (std::getenv("MLFLOW_EXPERIMENT_NAME") ? std::getenv("MLFLOW_EXPERIMENT_NAME") : "Default"));
  CHECK(target->tags == KeyValues{{"team", "vision"}, {"empty", ""}});
  CHECK(!target->spool.empty());
  section.uri = "off";
  CHECK(!target_of(section));
  section.uri = "file:///tmp/mlruns";
  CHECK_THROWS_WITH(target_of(section), Catch::Contains("tracking.mlflow.uri 'file:///tmp/mlruns'") &&
                                            Catch::Contains("http:// or https://"));
  section.uri = "http://tracker:5000";
  section.tags = {"=x"};
  CHECK_THROWS_WITH(target_of(section), Catch::Contains("'=x' is not KEY=VALUE"));
  section.tags = {std::string(300, 'k') + "=v"};
  CHECK_THROWS_WITH(target_of(section), Catch::Contains("MLflow keeps tag keys of at most 250 bytes"));
  section.tags = {};
  for (const auto& [uri, problem] : std::vector<std::pair<std::string, std::string>>{
           {"http://tracker\n:5000", "byte 14 is the control character \\x0a"},
           {"http://tracker :5000", "byte 14 is a space"},
           {"http://", "no host after the scheme"},
           {"http://***@tracker:5000", "masked (***)"}}) {
    section.uri = uri;
    CHECK_THROWS_WITH(target_of(section), Catch::Contains(problem));
  }
}

TEST_CASE("tracking keys with no tracking server are refused, checked whether tracking is on or not",
          "[fast][mlflow]") {
  if (std::getenv("MLFLOW_TRACKING_URI")) MPT_SKIP("MLFLOW_TRACKING_URI is set in this environment");
  Section section;
  section.tags = {"novalue"};
  CHECK_THROWS_WITH(target_of(section), Catch::Contains("'novalue' is not KEY=VALUE"));
  section.tags = {"team=vision"};
  CHECK_THROWS_WITH(target_of(section), Catch::Contains("tracking.mlflow.tags is set, but no tracking server is"));
  section.tags = {};
  section.experiment = "x";
  CHECK_THROWS_WITH(target_of(section, ""), Catch::Contains("mlflow.experiment is set, but no tracking server is"));
  section.uri = "off";  // turned off on purpose: the other keys may stay
  CHECK(!target_of(section));
}

TEST_CASE("trackers open from their own keys, which the key table holds once and applies always", "[fast][mlflow]") {
  REQUIRE(tracking::tracker_kinds().size() >= 1);
  for (const auto& kind : tracking::tracker_kinds())
    for (const auto& key : kind.keys) {
      const config::KeySpec* row = config::find_key(key.key);
      REQUIRE(row != nullptr);
      CHECK(row->doc == key.doc);
      CHECK(key.key.rfind("tracking." + kind.name + ".", 0) == 0);
    }
  Section section;
  section.uri = "off";
  CHECK(tracking::open_trackers(section.values(), {"mpt train x.yaml"}).empty());
  if (!http_available()) MPT_SKIP("this mpt was built without libcurl");
  section.uri = "http://tracker:5000";
  CHECK(tracking::open_trackers(section.values(), {"mpt train x.yaml"}).size() == 1);
}

TEST_CASE("after a resume cut its logs back, what MLflow already holds is not sent again, and counts stay true",
          "[fast][mlflow]") {
  testing::FakeServer server(testing::FakeServer::mlflow);
  const std::string dir = testing::scratch_dir("mlflow-rewind");
  const auto line = [](const nlohmann::json& record) { return record.dump() + "\n"; };
  const std::string metrics_kept = line({{"kind", "train"}, {"step", 10}, {"loss", 1.0}, {"time", 1.0e9}});
  const std::string metrics_cut =
      line({{"kind", "train"}, {"step", 20}, {"loss", 0.9}, {"time", 1.0e9 + 2}}) +
      line({{"kind", "eval"}, {"step", 20}, {"eval", {{"loss", 0.8}}}, {"time", 1.0e9 + 3}});
  const std::string events_kept = line({{"kind", "checkpoint"}, {"step", 15}, {"time", 1.0e9}});
  const std::string events_cut = line({{"kind", "skip"}, {"step", 17}, {"time", 1.0e9 + 1}});
  std::ofstream(dir + "/metrics.jsonl") << metrics_kept << metrics_cut;
  std::ofstream(dir + "/events.jsonl") << events_kept << events_cut;
  Client client(server.uri());
  RunDelivery(client, {server.uri(), "x", "", {}, dir + "/spool", "t"}, dir).deliver_progress();

  // Killed at 20, resumed from the checkpoint at 15: the resume cuts the lines past 15, then writes a resume event,
  // the same lines again (later), and new ones.
  forget_cut_lines(dir, "metrics.jsonl", metrics_kept.size(), metrics_kept.size() + metrics_cut.size());
  forget_cut_lines(dir, "events.jsonl", events_kept.size(), events_kept.size() + events_cut.size());
  std::ofstream(dir + "/metrics.jsonl") << metrics_kept << metrics_cut
                                        << line({{"kind", "train"}, {"step", 30}, {"loss", 0.7}, {"time", 1.0e9 + 9}});
  std::ofstream(dir + "/events.jsonl") << events_kept << line({{"kind", "resume"}, {"step", 15}}) << events_cut
                                       << line({{"kind", "skip"}, {"step", 29}, {"time", 1.0e9 + 8}});
  const size_t before = server.requests().size();
  RunDelivery(client, {server.uri(), "x", "", {}, dir + "/spool", "t"}, dir).deliver_progress();
  const auto requests = server.requests();
  REQUIRE(requests.size() > before);
  const nlohmann::json batch = nlohmann::json::parse(requests.back().body);
  std::vector<std::pair<std::string, int64_t>> sent;
  for (const auto& metric : batch["metrics"]) sent.emplace_back(metric["key"], metric["step"]);
  CHECK(sent ==
        std::vector<std::pair<std::string, int64_t>>{{"train/loss", 30}, {"events/resume", 15}, {"events/skip", 29}});
  for (const auto& metric : batch["metrics"])
    if (metric["key"] == "events/skip") CHECK(metric["value"] == 2.0);  // the second skip, not the third
}

TEST_CASE("mlflow: a server that is not there fails fast as unreachable, and the spool keeps the directory",
          "[fast][mlflow]") {
  const std::string dir = testing::scratch_dir("mlflow-nowhere");
  std::ofstream(dir + "/config.yaml") << "optimizer:\n  lr: 0.1\n";
  Target target{"http://127.0.0.1:9", "x", "", {}, dir + "/spool", "test"};  // the discard port: nobody listens
  std::vector<std::string> said;
  const auto started = std::chrono::steady_clock::now();
  deliver_or_spool(target, dir, "run", [&](const std::string& line) { said.push_back(line); });
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
  REQUIRE(said.size() == 1u);
  CHECK_THAT(said[0], Catch::Contains("is not answering") && Catch::Contains(dir + "/spool"));
  CHECK(std::distance(std::filesystem::directory_iterator(dir + "/spool"), std::filesystem::directory_iterator()) == 1);
  // Still down: the spool keeps it; its folder gone: dropped with a word.
  CHECK(flush_spool(dir + "/spool", [](const std::string&) {}) == 0);
  CHECK(!std::filesystem::is_empty(dir + "/spool"));
  const std::string gone = dir + "/gone";
  std::filesystem::create_directories(gone);
  Target elsewhere = target;
  elsewhere.spool = dir + "/spool2";
  spool(elsewhere, gone, "run");
  std::filesystem::remove_all(gone);
  said.clear();
  CHECK(flush_spool(elsewhere.spool, [&](const std::string& line) { said.push_back(line); }) == 0);
  REQUIRE(said.size() == 1u);
  CHECK_THAT(said[0], Catch::Contains("which is gone; dropped"));
  CHECK(std::filesystem::is_empty(elsewhere.spool));
}
