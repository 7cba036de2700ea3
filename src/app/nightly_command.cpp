// `mpt nightly SUITE.yaml [--root DIR]`: one unattended night of a suite, fit for cron.
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "common/dir_lock.h"
#include "common/echo.h"
#include "tools/nightly/night.h"
#include "tools/nightly/suite.h"
#include "tools/tracking/tracker.h"

namespace mpt::app {
namespace {

volatile int g_stop_requested = 0;
void request_stop(int) { g_stop_requested = 1; }

}  // namespace

int run_nightly(const NightlyOptions& options) {
  const nightly::Suite suite = nightly::load_suite(options.suite_path);
  const auto trackers =
      tracking::open_trackers(suite.tracking, {"mpt nightly " + options.suite_path, options.suite_path + ": "});
  const std::string root = options.root.empty() ? "runs/nightly/" + suite.name : options.root;
  std::filesystem::create_directories(root);
  const DirectoryLock lock(root, "mpt nightly");

  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  const nightly::NightOutcome outcome = nightly::run_night(suite, root, &g_stop_requested);
  for (const auto& line : outcome.report) std::cout << line << "\n";
  for (const auto& tracker : trackers)
    tracker->deliver(outcome.night_dir, "night",
                     [](const std::string& line) { std::cout << "nightly: " << terminal_safe(line) << "\n"; });
  return outcome.exit_code;
}

}  // namespace mpt::app
