// Echoing user text into messages: no control sequence reaches the terminal, and a huge value is cut.
#include <catch2/catch.hpp>

#include "common/echo.h"

using mpt::echo;
using mpt::terminal_safe;

TEST_CASE("echo escapes terminal control sequences and stray bytes, and keeps real text", "[fast][common]") {
  CHECK(echo("optimizer.lr") == "optimizer.lr");
  CHECK(echo("caf\xc3\xa9 \xe2\x82\xac") == "caf\xc3\xa9 \xe2\x82\xac");  // é and € pass through
  // OSC (set the title, ended by BEL) and CSI (clear the screen): not one raw ESC or BEL survives.
  const std::string hostile = "\x1b]0;owned\x07\x1b[2J\r\n\t\x7f";
  CHECK(echo(hostile) == "\\x1b]0;owned\\x07\\x1b[2J\\r\\n\\t\\x7f");
  CHECK(echo("\xc2\x9b"
             "31m") == "\\u009b31m");                // C1 CSI, as UTF-8
  CHECK(echo("\xff\xfe\xc3") == "\\xff\\xfe\\xc3");  // not UTF-8: each byte shown
}

TEST_CASE("echo cuts a long value at a character boundary and says how long it was", "[fast][common]") {
  const std::string value(127000, 'a');
  const std::string shown = echo(value);
  CHECK(shown.size() < 120);
  CHECK_THAT(shown, Catch::EndsWith("... (127000 bytes)"));
  // 79 ASCII bytes then a 2-byte character straddling the cut: the character is kept whole or not at all.
  const std::string straddling = std::string(79, 'b') + "\xc3\xa9" + std::string(50, 'c');
  CHECK_THAT(echo(straddling), Catch::StartsWith(std::string(79, 'b') + "\xc3\xa9..."));
}

TEST_CASE("terminal_safe keeps a message's line breaks and escapes the rest", "[fast][common]") {
  CHECK(terminal_safe("2 errors\n  a\x1b[2J\n  b") == "2 errors\n  a\\x1b[2J\n  b");
}
