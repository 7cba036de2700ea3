// A tracking server's answers as mpt reads them: the first two bytes pick the HTTP status (0: no answer), the rest
// is the body. Whatever a server (or a proxy in front of it) sends, the reader says Refused or Unreachable and
// names the request, or hands on a JSON object whose fields are then read as the client reads them.
#include "fuzz/harness.h"
#include "tools/mlflow/answer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const long kStatuses[] = {0, 200, 201, 204, 301, 400, 401, 403, 404, 408, 409, 429, 500, 502, 503, 504};
  mpt::mlflow::HttpResponse response;
  response.status = kStatuses[data[0] % 16];
  if (response.status == 0) response.error = "Couldn't connect to server";
  response.timed_out = data[1] % 2;
  response.body.assign(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    const nlohmann::json answer =
        mpt::mlflow::read_answer(response, "POST runs/create at http://fuzz", 1 + data[1] % 3);
    if (!answer.is_object()) std::abort();  // the reader promises an object
    for (const auto& path : {std::initializer_list<const char*>{"experiment", "experiment_id"},
                             std::initializer_list<const char*>{"experiment_id"},
                             std::initializer_list<const char*>{"run", "info", "run_id"}}) {
      try {
        (void)mpt::mlflow::text_at(answer, path, "GET runs/get");
      } catch (const mpt::mlflow::Unreachable&) {
      }
    }
  } catch (const mpt::mlflow::Refused&) {
  } catch (const mpt::mlflow::Unreachable&) {
  }
  return 0;
}
