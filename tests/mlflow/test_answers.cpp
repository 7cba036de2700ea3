// What mpt makes of a tracking server's answers, against a fake server on loopback: MLflow's refusals, answers
// that are not MLflow's (a proxy's HTML page, an endless body), and credentials that travel as credentials only.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/support/fake_server.h"
#include "tests/support/helpers.h"
#include "tools/mlflow/spool.h"

using namespace mpt::mlflow;
using mpt::testing::FakeServer;

namespace {

HttpResponse response(long status, const std::string& body) {
  HttpResponse answer;
  answer.status = status;
  answer.body = body;
  return answer;
}

std::string unreachable_message(const HttpResponse& answer) {
  try {
    read_answer(answer, "POST runs/create at http://h:5000", 1);
  } catch (const Unreachable& e) {
    return e.what();
  }
  return "(not Unreachable)";
}

}  // namespace

TEST_CASE("an answer is MLflow's JSON, MLflow's refusal, or not MLflow's at all, and says which request it was",
          "[fast][mlflow]") {
  CHECK(read_answer(response(200, R"({"run": {}})"), "r", 1).contains("run"));
  CHECK(read_answer(response(200, ""), "r", 1) == nlohmann::json::object());
  CHECK_THROWS_AS(read_answer(response(404, R"({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no"})"), "r", 1),
                  Refused);
  // A sign-in page where the API should be: not MLflow's, so the run waits in the spool, named clearly.
  CHECK_THAT(unreachable_message(response(200, "<html><body>Sign in</body></html>")),
             Catch::Contains("POST runs/create at http://h:5000: HTTP 200 with an answer that is not MLflow's JSON") &&
                 Catch::Contains("<html>"));
  CHECK_THAT(unreachable_message(response(404, "<html>Not Found</html>")),
             Catch::Contains("HTTP 404: <html>Not Found</html> (not MLflow's answer)"));
  CHECK_THAT(unreachable_message(response(200, "[1, 2]")), Catch::Contains("not MLflow's JSON"));
  CHECK_THAT(unreachable_message(response(503, R"({"error_code": "TEMPORARILY_UNAVAILABLE", "message": "busy"})")),
             Catch::Contains("HTTP 503: busy"));
  // A field the client needs, missing from a JSON answer: named, instead of a JSON library's exception.
  CHECK_THROWS_WITH(text_at(nlohmann::json::parse(R"({"run": {"info": {}}})"), {"run", "info", "run_id"}, "POST x"),
                    Catch::Contains("POST x: the answer has no text at run.info.run_id (not MLflow's)"));
  CHECK(text_at(nlohmann::json::parse(R"({"a": {"b": "c"}})"), {"a", "b"}, "r") == "c");
}

TEST_CASE("an endless answer is cut off at the ceiling, and an HTML answer spools the run with a clear message",
          "[fast][mlflow]") {
  const std::string huge(kMaxAnswerBytes + 1000, 'a');
  FakeServer endless([&](const mpt::testing::FakeRequest&) { return FakeServer::answer(200, huge, "text/plain"); });
  const HttpResponse cut = send({"GET", endless.uri() + "/api/2.0/mlflow/runs/get", "", "application/json", {}});
  CHECK(!cut.answered());
  CHECK_THAT(cut.error, Catch::Contains("ran past 4 MiB"));
  CHECK(cut.timed_out);  // not tried again

  FakeServer html([](const mpt::testing::FakeRequest&) {
    return FakeServer::answer(200, "<!doctype html><title>Proxy</title>", "text/html");
  });
  const std::string dir = mpt::testing::scratch_dir("mlflow-html");
  std::ofstream(dir + "/config.yaml") << "optimizer:\n  lr: 0.1\n";
  std::vector<std::string> said;
  deliver_or_spool(Target{html.uri(), "x", "", {}, dir + "/spool", "test"}, dir, "run",
                   [&](const std::string& line) { said.push_back(line); });
  REQUIRE(said.size() == 1u);
  CHECK_THAT(said[0], Catch::Contains("is not answering") &&
                          Catch::Contains("GET experiments/get-by-name?experiment_name=x at " + html.uri() +
                                          ": HTTP 200 with an answer that is not MLflow's JSON"));
  CHECK(std::distance(std::filesystem::directory_iterator(dir + "/spool"), std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("credentials in the URI go as basic credentials, and never into a message, a param, a tag or mlflow.json",
          "[fast][mlflow]") {
  FakeServer server(FakeServer::mlflow);
  const std::string dir = mpt::testing::scratch_dir("mlflow-credentials");
  std::ofstream(dir + "/config.yaml") << "tracking:\n  mlflow:\n    uri: http://***@h:1\n";
  std::ofstream(dir + "/metrics.jsonl") << R"({"kind": "train", "step": 10, "loss": 0.5, "time": 1796600000.25})"
                                        << "\n";
  std::ofstream(dir + "/summary.json") << R"({"status": "completed", "steps": 10, "ended_at": 1796600001.5})";
  const std::string uri = "http://al%40ice:S3cret@" + server.uri().substr(7);
  Target target{uri, "x", "", {{"note", "see http://bob:Hunter2@elsewhere"}}, dir + "/spool", "mpt train " + uri};
  std::vector<std::string> said;
  deliver_or_spool(target, dir, "run", [&](const std::string& line) { said.push_back(line); });
  REQUIRE(said.size() == 1u);
  CHECK_THAT(said[0], Catch::Contains("tracked at http://***@127.0.0.1"));
  std::string sent;
  for (const auto& request : server.requests()) {
    CHECK_THAT(request.headers, Catch::Contains("Authorization: Basic YWxAaWNlOlMzY3JldA=="));  // al@ice:S3cret
    sent += request.path + request.body;
  }
  CHECK_THAT(sent, Catch::Contains("mlflow.source.git.commit") && Catch::Contains("http://***@elsewhere"));
  CHECK(sent.find("S3cret") == std::string::npos);
  CHECK(sent.find("Hunter2") == std::string::npos);
  CHECK(mpt::testing::read_file_text(dir + "/mlflow.json").find("S3cret") == std::string::npos);
  // Each point at the time it was written, the run's end at the summary's.
  CHECK_THAT(sent, Catch::Contains(R"("timestamp":1796600000250)") && Catch::Contains(R"("end_time":1796600001500)"));
}
