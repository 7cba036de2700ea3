// A small HTTP client over libcurl for the tracking server: one request at a time, bounded by timeouts, never
// throwing for what the network does (the answer says what happened).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

namespace mpt::mlflow {

// The most of an answer mpt reads: MLflow's answers to its requests are a few kilobytes.
inline constexpr size_t kMaxAnswerBytes = size_t{4} << 20;

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT
  std::string url;             // may hold user:password@, sent as basic credentials (MLFLOW_TRACKING_USERNAME wins)
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::string> headers;  // "Name: value"
  long connect_timeout_ms = 3000;
  long timeout_ms = 15000;                    // the whole exchange
  const std::atomic<bool>* cancel = nullptr;  // when it turns true, the exchange stops within about a second
};

struct HttpResponse {
  long status = 0;  // 0 when no answer came
  std::string body;
  std::string error;  // the transport's reason when no answer came
  // Not worth another attempt: the server took the connection and did not answer in time, the run ended, or the
  // answer ran past kMaxAnswerBytes.
  bool timed_out = false;
  bool answered() const { return error.empty(); }
  bool ok() const { return answered() && status >= 200 && status < 300; }
};

// Sends `request`; an answer longer than kMaxAnswerBytes is cut off and reported as no answer.
HttpResponse send(const HttpRequest& request);

// Whether this build has libcurl; without it every request fails, so tracking is refused up front.
bool http_available();

// `text` escaped for a URL's path or query.
std::string url_escape(const std::string& text);

}  // namespace mpt::mlflow
