// Spec key rows (see key_rows.h).
#include "config/key_rows.h"

#include <utility>

namespace mpt::config::rows {

KeySpec integer(std::string key, std::string def, double min, double max, std::string doc) {
  return KeySpec{std::move(key), KeyType::kInt, std::move(def), {}, min, max, false, false, std::move(doc)};
}

KeySpec real(std::string key, std::string def, double min, double max, std::string doc, bool min_exclusive,
             bool max_exclusive) {
  return KeySpec{std::move(key), KeyType::kFloat, std::move(def), {}, min, max,
                 min_exclusive,  max_exclusive,   std::move(doc)};
}

KeySpec boolean(std::string key, std::string def, std::string doc) {
  return KeySpec{std::move(key), KeyType::kBool, std::move(def), {}, -kInf, kInf, false, false, std::move(doc)};
}

KeySpec text(std::string key, std::string def, std::string doc) {
  return KeySpec{std::move(key), KeyType::kString, std::move(def), {}, -kInf, kInf, false, false, std::move(doc)};
}

KeySpec choice(std::string key, std::string def, std::vector<std::string> choices, std::string doc) {
  return KeySpec{std::move(key), KeyType::kString, std::move(def), std::move(choices), -kInf, kInf, false,
                 false,          std::move(doc)};
}

KeySpec list(std::string key, KeyType type, std::string def, double min, std::string doc) {
  return KeySpec{std::move(key), type, std::move(def), {}, min, kInf, false, false, std::move(doc)};
}

KeySpec resumable(KeySpec spec) {
  spec.resumable = true;
  return spec;
}

}  // namespace mpt::config::rows
