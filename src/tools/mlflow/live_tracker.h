// Tracking a training run while it trains: a thread delivers the run directory every few seconds, and finish()
// has it deliver the rest once summary.json is written. The tracker never stalls or fails the training it
// follows: when the server does not answer (after bounded retries) it warns once, spools the directory for a
// later run to deliver, and stops trying; and finish() waits at most kFinishGrace before cutting it short.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "tools/mlflow/spool.h"
#include "tools/tracking/tracker.h"

namespace mpt::mlflow {

class LiveTracker : public tracking::RunFollower {
 public:
  using Say = std::function<void(const std::string&)>;
  // The longest the end of a run waits for the tracking server.
  static constexpr std::chrono::seconds kFinishGrace{20};

  // Starts the thread; it first delivers what earlier runs left in the spool.
  LiveTracker(Target target, std::string run_dir, Say info, Say warn,
              std::chrono::milliseconds interval = std::chrono::seconds(10));
  ~LiveTracker() override;  // without finish(): stops at once (the run failed before its summary)
  LiveTracker(const LiveTracker&) = delete;
  LiveTracker& operator=(const LiveTracker&) = delete;

  // Delivers the final state (or spools it); call after summary.json is written.
  void finish() override;

 private:
  void loop();
  // Runs one delivery; false once the server is given up on (warned, spooled) or refused the run.
  bool attempt(const std::function<void()>& delivery);
  void stop(bool deliver_final, std::chrono::seconds grace);

  Target target_;
  std::string dir_;
  Say info_, warn_;
  std::chrono::milliseconds interval_;
  std::atomic<bool> cancel_{false};  // cuts every request short: the run's end will not wait longer
  Client client_;
  RunDelivery delivery_;
  bool given_up_ = false;
  bool stopping_ = false, deliver_final_ = false, done_ = false;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::thread thread_;
};

}  // namespace mpt::mlflow
