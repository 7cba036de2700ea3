#include "tools/mlflow/live_tracker.h"

#include <fmt/format.h>

#include "common/echo.h"

namespace mpt::mlflow {

LiveTracker::LiveTracker(Target target, std::string run_dir, Say info, Say warn, std::chrono::milliseconds interval)
    : target_(std::move(target)),
      dir_(std::move(run_dir)),
      info_(std::move(info)),
      warn_(std::move(warn)),
      interval_(interval),
      client_(target_.uri, Retries{}, &cancel_),
      delivery_(client_, target_, dir_) {
  thread_ = std::thread([this] { loop(); });
}

LiveTracker::~LiveTracker() { stop(/*deliver_final=*/false, std::chrono::seconds(0)); }

void LiveTracker::finish() { stop(/*deliver_final=*/true, kFinishGrace); }

// Asks the thread to end (after the final delivery, if asked), waits up to `grace`, then cancels what it is
// still sending, which makes that delivery unreachable: warned and spooled.
void LiveTracker::stop(bool deliver_final, std::chrono::seconds grace) {
  if (!thread_.joinable()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  deliver_final_ = deliver_final;
  wake_.notify_all();
  if (!finished_.wait_for(lock, grace, [this] { return done_; })) cancel_ = true;
  lock.unlock();
  thread_.join();
}

bool LiveTracker::attempt(const std::function<void()>& delivery) {
  if (given_up_) return false;
  try {
    delivery();
    return true;
  } catch (const Unreachable& e) {
    given_up_ = true;
    try {
      spool(target_, dir_, "run");
      warn_(
          fmt::format("mlflow: {} is not answering ({}); training goes on, and this run waits in {} for the next "
                      "tracked mpt command to deliver it",
                      client_.shown_uri(), e.what(), target_.spool));
    } catch (const std::exception& spool_error) {
      warn_(fmt::format("mlflow: {} is not answering ({}), and the spool failed too: {}", client_.shown_uri(), e.what(),
                        spool_error.what()));
    }
  } catch (const std::exception& e) {
    given_up_ = true;
    warn_(fmt::format("mlflow: {} refused this run ({}); it is not tracked further", client_.shown_uri(), e.what()));
  }
  return false;
}

void LiveTracker::loop() {
  try {
    deliver_spooled(target_.spool, info_, warn_);
  } catch (const std::exception& e) {
    warn_(fmt::format("mlflow spool {}: {}", target_.spool, e.what()));
  }
  if (attempt([this] { delivery_.deliver_progress(); }))
    info_(fmt::format("mlflow: tracking to {} as run {} of experiment '{}'", client_.shown_uri(),
                      delivery_.run().run_id, echo(target_.experiment)));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && !given_up_) {
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    attempt([this] { delivery_.deliver_progress(); });
    lock.lock();
  }
  wake_.wait(lock, [this] { return stopping_; });
  if (deliver_final_) {
    lock.unlock();
    attempt([this] { delivery_.deliver_final(); });
    lock.lock();
  }
  done_ = true;
  finished_.notify_all();
}

}  // namespace mpt::mlflow
