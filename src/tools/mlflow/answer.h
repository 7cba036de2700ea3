// What a tracking server's answer means, apart from sending it (pure, so the fuzz harness reads answers too):
// MLflow's JSON, MLflow's own refusal, or an answer that is not the API's - a proxy's HTML page, a truncated or
// endless body - which names the server and the request and is worth trying again later.
#pragma once

#include <nlohmann/json.hpp>

#include <initializer_list>
#include <stdexcept>
#include <string>

#include "tools/mlflow/http.h"

namespace mpt::mlflow {

// The server did not answer, kept failing (5xx, 429) through the retries, or answered something that is not
// MLflow's API: worth trying again later (the run is spooled).
struct Unreachable : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// MLflow answered no (a 4xx with its error JSON) to a well-formed request: trying again will not help.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether an HTTP status may pass when the request is sent again: no answer, 408, 429 and 5xx.
bool worth_retrying(long status);

// The JSON object of a 2xx answer (an empty body reads as {}), for `request` ("POST runs/create at
// http://host:5000"). Throws Refused for MLflow's 4xx refusals, Unreachable for everything else; `attempts`
// is said of an answer that kept failing.
nlohmann::json read_answer(const HttpResponse& response, const std::string& request, int attempts);

// The string at `path` in an answer; Unreachable naming the request and the path when it is not there.
std::string text_at(const nlohmann::json& answer, std::initializer_list<const char*> path, const std::string& request);

}  // namespace mpt::mlflow
