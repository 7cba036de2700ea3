// Tracking a training run while it trains: a thread delivers the run directory every few seconds, and finish()
// delivers the rest once summary.json is written. The tracker never stalls or fails the training it follows:
// when the server does not answer (after bounded retries) it warns once, spools the directory for a later run
// to deliver, and stops trying.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "tools/mlflow/delivery.h"

namespace mpt::mlflow {

class LiveTracker {
 public:
  using Say = std::function<void(const std::string&)>;
  // Starts the thread; it first delivers what earlier runs left in the spool.
  LiveTracker(Target target, std::string run_dir, Say info, Say warn,
              std::chrono::milliseconds interval = std::chrono::seconds(10));
  ~LiveTracker();
  LiveTracker(const LiveTracker&) = delete;
  LiveTracker& operator=(const LiveTracker&) = delete;

  // Stops the thread and delivers the final state (or spools it); call after summary.json is written.
  void finish();

 private:
  void loop();
  // Runs one delivery; false once the server is given up on (warned, spooled) or refused the run.
  bool attempt(const std::function<void()>& delivery);

  Target target_;
  std::string dir_;
  Say info_, warn_;
  std::chrono::milliseconds interval_;
  Client client_;
  RunDelivery delivery_;
  bool given_up_ = false;
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace mpt::mlflow
