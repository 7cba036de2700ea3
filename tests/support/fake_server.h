// A fake HTTP server on a loopback port, for what a tracking server (or a proxy in front of one) may answer: each
// request is recorded and answered by a handler, on a thread of its own, one connection at a time.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mpt::testing {

// A socket listening on a free loopback port (set in `port`); the kernel's backlog takes connections before anyone
// accepts them.
int listen_on_loopback(int& port);

struct FakeRequest {
  std::string method, path, headers, body;
};

class FakeServer {
 public:
  // The whole HTTP answer to write for a request (status line, headers, body); FakeServer::json() makes one.
  using Handler = std::function<std::string(const FakeRequest&)>;

  explicit FakeServer(Handler handler);
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<FakeRequest> requests() const;

  // An answer with `status` and a body.
  static std::string answer(int status, const std::string& body, const std::string& type = "application/json");
  // MLflow's answers to every request mpt sends, enough for a delivery to go through: an experiment, a run
  // without an artifact store mpt writes to, and {} for the rest.
  static std::string mlflow(const FakeRequest& request);

 private:
  void serve();

  Handler handler_;
  int port_ = 0, fd_ = -1;  // in this order: listening sets the port
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<FakeRequest> requests_;
  std::thread thread_;
};

}  // namespace mpt::testing
