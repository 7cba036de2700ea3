// See answer.h.
#include "tools/mlflow/answer.h"

#include <fmt/format.h>

#include "common/echo.h"
#include "common/json.h"

namespace mpt::mlflow {
namespace {

// MLflow's error answers: {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "..."}.
bool is_mlflow_error(const nlohmann::json& answer) {
  return answer.is_object() && answer.contains("error_code") && answer["error_code"].is_string();
}

}  // namespace

bool worth_retrying(long status) { return status == 0 || status == 408 || status == 429 || status >= 500; }

nlohmann::json read_answer(const HttpResponse& response, const std::string& request, int attempts) {
  const std::string tries = attempts > 1 ? fmt::format(" ({} attempts)", attempts) : "";
  if (!response.answered()) throw Unreachable(fmt::format("{}: {}{}", request, response.error, tries));
  const nlohmann::json answer = parse_json(response.body);
  if (response.ok()) {
    if (response.body.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::json::object();
    if (answer.is_object()) return answer;
    throw Unreachable(fmt::format("{}: HTTP {} with an answer that is not MLflow's JSON: {}", request, response.status,
                                  echo(response.body, 120)));
  }
  const std::string reason = is_mlflow_error(answer) && answer.contains("message") && answer["message"].is_string()
                                 ? echo(answer["message"].get<std::string>(), 200)
                                 : echo(response.body, 120);
  const std::string message = fmt::format("{}: HTTP {}: {}", request, response.status, reason);
  if (!worth_retrying(response.status) && is_mlflow_error(answer)) throw Refused(message);
  throw Unreachable(message + (is_mlflow_error(answer) ? tries : " (not MLflow's answer)"));
}

std::string text_at(const nlohmann::json& answer, std::initializer_list<const char*> path, const std::string& request) {
  const nlohmann::json* node = &answer;
  std::string joined;
  for (const char* key : path) {
    if (!joined.empty()) joined += '.';
    joined += key;
    const bool found = node && node->is_object() && node->contains(key);
    node = found ? &*node->find(key) : nullptr;
  }
  if (!node || !node->is_string())
    throw Unreachable(fmt::format("{}: the answer has no text at {} (not MLflow's)", request, joined));
  return node->get<std::string>();
}

}  // namespace mpt::mlflow
