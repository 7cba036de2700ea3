// The live tracker never holds a run's end for long: a server that takes connections and never answers is cut
// short, and the run waits in the spool.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/fake_server.h"
#include "tests/support/helpers.h"
#include "tools/mlflow/live_tracker.h"

using namespace mpt::mlflow;

namespace {

// A loopback port whose server accepts every connection (the kernel's backlog does) and never answers.
class SilentServer {
 public:
  SilentServer() : fd_(mpt::testing::listen_on_loopback(port_)) {}
  ~SilentServer() { close(fd_); }
  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0, fd_;  // in this order: listening sets the port
};

}  // namespace

TEST_CASE("mlflow: a tracker stuck on a silent server is cut short when the run ends, and spools the run",
          "[fast][mlflow]") {
  const std::string dir = mpt::testing::scratch_dir("mlflow-silent");
  std::ofstream(dir + "/config.yaml") << "optimizer:\n  lr: 0.1\n";
  SilentServer server;
  std::vector<std::string> warnings;
  const auto started = std::chrono::steady_clock::now();
  {
    LiveTracker tracker(
        Target{server.uri(), "x", "", {}, dir + "/spool", "test"}, dir, [](const std::string&) {},
        [&](const std::string& line) { warnings.push_back(line); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the thread now waits on its first request
  }                                                               // the run failed before its summary: no grace
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));  // not the request's 15 s timeout
  REQUIRE(warnings.size() == 1u);
  CHECK_THAT(warnings[0], Catch::Contains("cancelled at the end of the run"));
  CHECK(std::distance(std::filesystem::directory_iterator(dir + "/spool"), std::filesystem::directory_iterator()) == 1);
}
