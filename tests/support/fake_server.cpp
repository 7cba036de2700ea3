// See fake_server.h.
#include "tests/support/fake_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstring>

namespace mpt::testing {
namespace {

// Reads one request: headers up to the blank line, then Content-Length bytes of body.
FakeRequest read_request(int client) {
  std::string data;
  char buffer[65536];
  size_t header_end = std::string::npos;
  size_t wanted = 0;
  while (true) {
    if (header_end != std::string::npos && data.size() >= header_end + 4 + wanted) break;
    pollfd ready{client, POLLIN, 0};
    if (poll(&ready, 1, 5000) <= 0) break;
    const ssize_t n = recv(client, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
    if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
      std::string lower = data.substr(0, header_end);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t length = lower.find("content-length:");
      if (length != std::string::npos) wanted = std::stoul(lower.substr(length + 15));
    }
  }
  FakeRequest request;
  const size_t line_end = data.find("\r\n");
  const std::string line = data.substr(0, line_end);
  request.method = line.substr(0, line.find(' '));
  const size_t path_start = line.find(' ') + 1;
  request.path = line.substr(path_start, line.find(' ', path_start) - path_start);
  if (header_end != std::string::npos) {
    request.headers = data.substr(line_end + 2, header_end - line_end - 2);
    request.body = data.substr(header_end + 4);
  }
  return request;
}

void write_all(int client, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(client, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client hung up (an answer it would not read to the end)
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

int listen_on_loopback(int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  listen(fd, 16);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
  return fd;
}

FakeServer::FakeServer(Handler handler) : handler_(std::move(handler)), fd_(listen_on_loopback(port_)) {
  thread_ = std::thread([this] { serve(); });
}

FakeServer::~FakeServer() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

std::vector<FakeRequest> FakeServer::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

void FakeServer::serve() {
  while (!stop_) {
    pollfd ready{fd_, POLLIN, 0};
    if (poll(&ready, 1, 100) <= 0) continue;
    const int client = accept(fd_, nullptr, nullptr);
    if (client < 0) continue;
    const FakeRequest request = read_request(client);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(request);
    }
    write_all(client, handler_(request));
    close(client);
  }
}

std::string FakeServer::answer(int status, const std::string& body, const std::string& type) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
         "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string FakeServer::mlflow(const FakeRequest& request) {
  if (request.path.find("experiments/get-by-name") != std::string::npos)
    return answer(200, R"({"experiment": {"experiment_id": "7"}})");
  if (request.path.find("runs/create") != std::string::npos)
    return answer(200, R"({"run": {"info": {"run_id": "run-1", "artifact_uri": ""}}})");
  if (request.path.find("runs/get") != std::string::npos)
    return answer(200, R"({"run": {"info": {"run_id": "run-1", "lifecycle_stage": "active"}}})");
  return answer(200, "{}");
}

}  // namespace mpt::testing
