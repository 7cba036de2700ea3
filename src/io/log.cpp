// Logging sinks and the progress line. The console sink starts each line with "erase line" on a live
// terminal so log lines print cleanly over the progress line; files never see control characters.
#include "io/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/echo.h"

namespace mpt::io {
namespace {

// Every message made terminal-safe before any sink sees it: a value from a file, the environment or a server
// never brings an escape sequence or a credential into the terminal or train.log.
class TerminalSafeSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit TerminalSafeSink(std::vector<spdlog::sink_ptr> sinks) : sinks_(std::move(sinks)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    const std::string safe = terminal_safe(std::string_view(message.payload.data(), message.payload.size()));
    spdlog::details::log_msg copy(message);
    copy.payload = spdlog::string_view_t(safe.data(), safe.size());
    for (const auto& sink : sinks_)
      if (sink->should_log(copy.level)) sink->log(copy);
  }
  void flush_() override {
    for (const auto& sink : sinks_) sink->flush();
  }

 private:
  std::vector<spdlog::sink_ptr> sinks_;
};

}  // namespace

bool stderr_is_live_terminal() {
  const char* term = std::getenv("TERM");
  const char* ci = std::getenv("CI");
  return isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0) && !(ci && *ci);
}

std::shared_ptr<spdlog::logger> make_logger(const std::string& log_path) {
  const bool live = stderr_is_live_terminal();
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      live && !std::getenv("NO_COLOR") ? spdlog::color_mode::automatic : spdlog::color_mode::never);
  console->set_pattern(live ? "\r\033[K%^%L%$ %H:%M:%S %v" : "%L %H:%M:%S %v");
  std::vector<spdlog::sink_ptr> sinks{console};
  if (!log_path.empty()) {
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_path);
    file->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
    sinks.push_back(file);
  }
  auto logger = std::make_shared<spdlog::logger>("mpt", std::make_shared<TerminalSafeSink>(std::move(sinks)));
  logger->flush_on(spdlog::level::info);
  return logger;
}

std::string format_duration(double seconds) {
  const long total = static_cast<long>(seconds + 0.5);
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof(text), "%ldh%02ldm", total / 3600, total % 3600 / 60);
  else
    std::snprintf(text, sizeof(text), "%ldm%02lds", total / 60, total % 60);
  return text;
}

std::string format_progress(const ProgressLine& p) {
  // A value not measured yet shows as "-", never as a zero that reads like a measurement.
  auto or_dash = [](bool known, const char* format, double value) {
    if (!known) return std::string("-");
    char text[32];
    std::snprintf(text, sizeof(text), format, value);
    return std::string(text);
  };
  char text[256];
  std::snprintf(text, sizeof(text), "step %lld/%lld  loss %s  scale %g  lr %.3g  %s samples/s  eta %s",
                static_cast<long long>(p.step), static_cast<long long>(p.total_steps),
                or_dash(std::isfinite(p.loss), "%.4f", p.loss).c_str(), p.loss_scale, p.lr,
                or_dash(p.samples_per_sec > 0, "%.0f", p.samples_per_sec).c_str(),
                p.samples_per_sec > 0 || p.step == p.total_steps ? format_duration(p.eta_sec).c_str() : "-");
  return text;
}

void Progress::update(const ProgressLine& line) {
  if (!live_) return;
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_draw_ < 0.2 && line.step < line.total_steps) return;
  last_draw_ = now;
  std::fprintf(stderr, "\r\033[K%s", format_progress(line).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace mpt::io
