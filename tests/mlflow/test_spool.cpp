// The spool delivers every deliverable entry: a server that does not answer holds back only its own entries, and an
// entry that cannot be read, waited too long, names a URI that can never work or was refused is moved aside.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/fake_server.h"
#include "tests/support/helpers.h"
#include "tools/mlflow/spool.h"

using namespace mpt::mlflow;
using mpt::testing::FakeServer;
namespace fs = std::filesystem;

namespace {

std::string run_dir(const std::string& root, const std::string& name) {
  const std::string dir = root + "/" + name;
  fs::create_directories(dir);
  std::ofstream(dir + "/summary.json") << R"({"status": "completed", "steps": 1})";
  return dir;
}

size_t files_in(const std::string& folder) {
  size_t count = 0;
  for (const auto& entry : fs::directory_iterator(folder)) count += entry.is_regular_file();
  return count;
}

}  // namespace

TEST_CASE("a server that does not answer holds back only its own spool entries, with a warning naming them",
          "[fast][mlflow]") {
  const std::string root = mpt::testing::scratch_dir("spool-mixed"), spool_dir = root + "/spool";
  FakeServer live(FakeServer::mlflow);
  // Oldest first: two runs for a server that is gone, then one for a live one.
  spool({"http://127.0.0.1:9", "x", "", {}, spool_dir, "t"}, run_dir(root, "dead1"), "run");
  spool({"http://127.0.0.1:9", "x", "", {}, spool_dir, "t"}, run_dir(root, "dead2"), "run");
  spool({live.uri(), "x", "", {}, spool_dir, "t"}, run_dir(root, "alive"), "run");
  for (const auto& entry : fs::directory_iterator(spool_dir))  // the entries hold URIs: the owner's alone
    CHECK((fs::status(entry).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  std::vector<std::string> warnings;
  CHECK(flush_spool(spool_dir, [&](const std::string& line) { warnings.push_back(line); }) == 1);
  CHECK(fs::exists(root + "/alive/mlflow.json"));  // delivered behind the dead server's entries
  CHECK(files_in(spool_dir) == 2u);
  REQUIRE(warnings.size() == 1u);  // one per server, not one per entry
  CHECK_THAT(warnings[0], Catch::Contains("http://127.0.0.1:9 is not answering") &&
                              Catch::Contains("2 entries wait for it, the oldest for 0 min") &&
                              Catch::Contains(root + "/dead1") && Catch::Contains(root + "/dead2"));
}

TEST_CASE("spool entries that cannot be read, waited too long, or can never be delivered are moved aside, named",
          "[fast][mlflow]") {
  const std::string root = mpt::testing::scratch_dir("spool-aside"), spool_dir = root + "/spool";
  fs::create_directories(spool_dir + "/folder.json");  // not a file: read as an entry it would fail forever
  std::ofstream(spool_dir + "/garbage.json") << "{not json";
  std::ofstream(spool_dir + "/fields.json") << R"({"kind": "run", "dir": 7, "uri": "http://h"})";
  const std::string dir = run_dir(root, "run");
  const int64_t old = now_ms() - 31LL * 24 * 3600 * 1000;
  std::ofstream(spool_dir + "/old.json") << nlohmann::json{
      {"kind", "run"}, {"dir", dir}, {"uri", "http://h:1"}, {"spooled_at_ms", old}};
  std::ofstream(spool_dir + "/bad_uri.json")
      << nlohmann::json{{"kind", "run"}, {"dir", dir}, {"uri", "http://a b"}, {"spooled_at_ms", now_ms()}};
  FakeServer refusing([](const mpt::testing::FakeRequest&) {
    return FakeServer::answer(403, R"({"error_code": "PERMISSION_DENIED", "message": "read-only user"})");
  });
  spool({refusing.uri(), "x", "", {}, spool_dir, "t"}, dir, "run");
  std::vector<std::string> warnings;
  CHECK(flush_spool(spool_dir, [&](const std::string& line) { warnings.push_back(line); }) == 0);
  CHECK(files_in(spool_dir) == 0u);  // nothing left to block later flushes
  CHECK(files_in(spool_dir + "/" + kSetAsideFolder) == 5u);
  CHECK(fs::is_directory(spool_dir + "/" + kSetAsideFolder + "/folder.json"));
  std::string all;
  for (const auto& line : warnings) all += line + "\n";
  INFO(all);
  CHECK(warnings.size() == 6u);
  CHECK_THAT(all, Catch::Contains("folder.json is not a spool entry (") && Catch::Contains("is a directory"));
  CHECK_THAT(all, Catch::Contains("garbage.json is not a spool entry"));
  CHECK_THAT(all, Catch::Contains("fields.json is not a spool entry ('dir' is not text)"));
  CHECK_THAT(all, Catch::Contains("waited 31 days, past the spool's 30 days"));
  CHECK_THAT(all, Catch::Contains("names a URI that can never work (byte 8 is a space)"));
  CHECK_THAT(all, Catch::Contains("was refused: ") && Catch::Contains("read-only user"));
  // Read on its own, an entry says what is wrong with it.
  std::string problem;
  CHECK(!read_spool_entry(R"({"kind": "job", "dir": "/x", "uri": "http://h", "spooled_at_ms": 1})", problem));
  CHECK(problem == "'kind' is not run, comparison, night or numerics");
  CHECK(!read_spool_entry(R"({"kind": "run", "dir": "/x", "uri": "http://h", "tags": [["a"]], "spooled_at_ms": 1})",
                          problem));
  CHECK(problem == "a tag is not a [key, value] pair of text");
}
