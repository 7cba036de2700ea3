// Where broken invariants end up: an exception that names the check, so the top level reports it.
#include "common/error.h"

namespace mpt {

void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  throw Error(std::string("internal check failed: ") + condition + " at " + file + ":" + std::to_string(line) + ": " +
              message);
}

}  // namespace mpt
