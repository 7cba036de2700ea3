// Echoing what a user typed or a file held back into a message: escaped so that no control sequence reaches the
// terminal (ESC, BEL, C1 controls, stray bytes), credentials in URIs masked (common/uri.h), and cut to a short
// prefix so that a huge value is not replayed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mpt {

inline constexpr size_t kEchoBytes = 80;

// `text` with control characters and invalid UTF-8 escaped (\n, \t, \x1b, \u009b), cut to about `limit` bytes
// at a character boundary with "... (N bytes)" appended when longer.
std::string echo(std::string_view text, size_t limit = kEchoBytes);

// A whole message made terminal-safe: like echo() without the cut, but its line breaks kept (multi-error lists).
std::string terminal_safe(std::string_view message);

}  // namespace mpt
