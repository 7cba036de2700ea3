// See echo.h.
#include "common/echo.h"

#include <fmt/format.h>

#include "common/uri.h"

namespace mpt {
namespace {

// The length of the valid UTF-8 sequence at `i` and its code point, or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view text, size_t i, char32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 && lead <= 0xDF ? 2 : 0;
  if (length == 0 || lead > 0xF4 || i + length > text.size()) return 0;
  char32_t value = lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i + k) & 0x3F);
  }
  const char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < smallest[length] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *code_point = value;
  return length;
}

// Appends the character at `i` as it may reach a terminal; returns the bytes it consumed.
size_t append_escaped(std::string& out, std::string_view text, size_t i, bool keep_newlines) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c == '\n' && keep_newlines) return out.push_back('\n'), 1;
  if (c == '\n') return out += "\\n", 1;
  if (c == '\t') return out += "\\t", 1;
  if (c == '\r') return out += "\\r", 1;
  if (c < 0x20 || c == 0x7F) return out += fmt::format("\\x{:02x}", c), 1;
  if (c < 0x80) return out.push_back(static_cast<char>(c)), 1;
  char32_t code_point = 0;
  const size_t length = utf8_sequence(text, i, &code_point);
  if (length == 0) return out += fmt::format("\\x{:02x}", c), 1;
  if (code_point < 0xA0) return out += fmt::format("\\u{:04x}", static_cast<uint32_t>(code_point)), length;  // C1
  out.append(text.substr(i, length));
  return length;
}

}  // namespace

std::string echo(std::string_view raw, size_t limit) {
  const std::string text = redact_credentials(raw);
  std::string out;
  size_t i = 0;
  while (i < text.size() && out.size() < limit) i += append_escaped(out, text, i, /*keep_newlines=*/false);
  if (i < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

std::string terminal_safe(std::string_view raw) {
  const std::string message = redact_credentials(raw);
  std::string out;
  for (size_t i = 0; i < message.size();) i += append_escaped(out, message, i, /*keep_newlines=*/true);
  return out;
}

}  // namespace mpt
