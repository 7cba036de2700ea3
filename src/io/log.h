// The run's human-readable outputs: a logger writing train.log (plain text, always) and the console, and a
// progress display that is a live line on a TTY and periodic plain lines elsewhere (cron, CI, files).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace mpt::io {

// True when stderr is an interactive terminal worth redrawing (not TERM=dumb, not under CI).
bool stderr_is_live_terminal();

// A logger to stderr and, when log_path is not empty, to that file (never with colour codes).
std::shared_ptr<spdlog::logger> make_logger(const std::string& log_path);

struct ProgressLine {
  int64_t step;
  int64_t total_steps;
  double loss;
  double loss_scale;
  double lr;
  double samples_per_sec;
  double eta_sec;
};

std::string format_progress(const ProgressLine& line);

// The live status line on a terminal, redrawn at most a few times a second; does nothing when not live
// (there the caller's periodic log lines are the progress report).
class Progress {
 public:
  explicit Progress(bool live) : live_(live) {}
  ~Progress() { finish(); }

  bool live() const { return live_; }
  void update(const ProgressLine& line);
  void finish();  // ends the live line so later output starts clean

 private:
  bool live_;
  bool drawn_ = false;
  double last_draw_ = -1.0;
};

std::string format_duration(double seconds);

}  // namespace mpt::io
