// JSON from a user's file, parsed with its nesting bounded: deeper documents are refused before anything walks
// them (nlohmann's dump and most readers recurse once per level).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace mpt {

inline constexpr int kMaxJsonDepth = 64;

// The document in [begin, end), or a discarded value when it is not valid JSON or nests deeper than
// kMaxJsonDepth; `problem` then says which.
template <typename Iterator>
nlohmann::json parse_json(Iterator begin, Iterator end, std::string* problem = nullptr) {
  bool too_deep = false;
  nlohmann::json::parser_callback_t bounded = [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(begin, end, bounded);
  } catch (const nlohmann::json::exception& e) {
    if (problem) *problem = e.what();
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  if (too_deep) {
    if (problem) *problem = "nested more than " + std::to_string(kMaxJsonDepth) + " levels deep";
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return value;
}

inline nlohmann::json parse_json(const std::string& text, std::string* problem = nullptr) {
  return parse_json(text.begin(), text.end(), problem);
}

}  // namespace mpt
