#include "tools/mlflow/http.h"

#ifdef MPT_WITH_CURL
#include <curl/curl.h>
#endif

#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "common/uri.h"

namespace mpt::mlflow {

#ifndef MPT_WITH_CURL

bool http_available() { return false; }

HttpResponse send(const HttpRequest&) {
  return HttpResponse{0, "", "this mpt was built without libcurl (apt install libcurl4-openssl-dev, then rebuild)"};
}

std::string url_escape(const std::string& text) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

#else

bool http_available() { return true; }

namespace {

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

int check_cancel(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(cancel)->load() ? 1 : 0;
}

struct Body {
  std::string text;
  bool too_long = false;
};

size_t append_body(char* data, size_t size, size_t count, void* target) {
  Body& body = *static_cast<Body*>(target);
  if (body.text.size() + size * count > kMaxAnswerBytes) {
    body.too_long = true;
    return 0;  // libcurl stops the transfer
  }
  body.text.append(data, size * count);
  return size * count;
}

// MLflow's clients read credentials and TLS settings from these variables, else from the URI's user:password@;
// so does mpt.
void apply_credentials(CURL* curl, curl_slist*& headers, const UriCredentials& from_uri) {
  if (const char* token = std::getenv("MLFLOW_TRACKING_TOKEN"); token && *token)
    headers = curl_slist_append(headers, (std::string("Authorization: Bearer ") + token).c_str());
  const char* user = std::getenv("MLFLOW_TRACKING_USERNAME");
  const char* password = std::getenv("MLFLOW_TRACKING_PASSWORD");
  if ((user && *user) || from_uri.present) {
    const bool environment = user && *user;
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, environment ? user : from_uri.user.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, environment ? (password ? password : "") : from_uri.password.c_str());
  }
  if (const char* insecure = std::getenv("MLFLOW_TRACKING_INSECURE_TLS"); insecure && std::string(insecure) == "true") {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (const char* bundle = std::getenv("MLFLOW_TRACKING_SERVER_CERT_PATH"); bundle && *bundle)
    curl_easy_setopt(curl, CURLOPT_CAINFO, bundle);
}

}  // namespace

HttpResponse send(const HttpRequest& request) {
  global_init_once();
  HttpResponse response;
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return HttpResponse{0, "", "libcurl could not start a request"};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, ("Content-Type: " + request.content_type).c_str());
  for (const auto& header : request.headers) headers = curl_slist_append(headers, header.c_str());
  CURL* c = curl.get();
  const UriCredentials target = split_credentials(request.url);
  apply_credentials(c, headers, target);
  curl_easy_setopt(c, CURLOPT_URL, target.url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: safe beside the training threads
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, request.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, request.timeout_ms);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  Body body;
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  if (request.cancel) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, check_cancel);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(request.cancel));
  }
  if (request.method == "POST" || request.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }
  const CURLcode code = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (body.too_long)
    return HttpResponse{0, "", "the answer ran past " + std::to_string(kMaxAnswerBytes >> 20) + " MiB (not MLflow's)",
                        true};
  response.body = std::move(body.text);
  if (code != CURLE_OK) {
    const bool cancelled = code == CURLE_ABORTED_BY_CALLBACK;
    return HttpResponse{0, "", cancelled ? "cancelled at the end of the run" : curl_easy_strerror(code),
                        code == CURLE_OPERATION_TIMEDOUT || cancelled};
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

std::string url_escape(const std::string& text) {
  global_init_once();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  char* escaped = curl_easy_escape(curl.get(), text.data(), static_cast<int>(text.size()));
  std::string out = escaped ? escaped : "";
  curl_free(escaped);
  return out;
}

#endif

}  // namespace mpt::mlflow
