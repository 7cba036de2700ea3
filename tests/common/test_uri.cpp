// URIs that may carry credentials: masked wherever shown, checked whole, split into the credentials curl sends.
#include <catch2/catch.hpp>

#include "common/echo.h"
#include "common/uri.h"

using namespace mpt;

TEST_CASE("credentials in URIs are masked wherever text shows one, and nothing else changes", "[fast][common]") {
  CHECK(redact_credentials("http://alice:S3cret@mlflow.internal:5000") == "http://***@mlflow.internal:5000");
  CHECK(redact_credentials("https://token@host/path?x=1") == "https://***@host/path?x=1");
  CHECK(redact_credentials("http://host:5000/api?access_token=abc&run=7#frag") ==
        "http://host:5000/api?access_token=***&run=7#frag");
  CHECK(redact_credentials("http://h/?sig=1;PASSWORD=2&key=3") == "http://h/?sig=***;PASSWORD=***&key=***");
  // In prose: two URIs in one message, punctuation after one kept, text between them untouched.
  CHECK(redact_credentials("GET runs/get at http://u:p@h:1/?token=t: refused by https://x:y@z.") ==
        "GET runs/get at http://***@h:1/?token=***: refused by https://***@z.");
  for (const char* plain : {"http://127.0.0.1:5000", "mlflow-artifacts:/1/abc/artifacts", "no uri here", "a@b.c",
                            "file:///tmp/x@y", "", "://@"}) {
    INFO(plain);
    CHECK(redact_credentials(plain) == redact_credentials(redact_credentials(plain)));
  }
  CHECK(redact_credentials("file:///tmp/x@y") == "file:///tmp/x@y");  // an '@' in a path is not a userinfo
  CHECK(redact_credentials("http://***@h") == "http://***@h");        // masking is idempotent
  // echo() and terminal_safe() mask too: every message and log line goes through one of them.
  CHECK(echo("uri 'http://u:pw@h:1'") == "uri 'http://***@h:1'");
  CHECK(terminal_safe("a\nhttp://u:pw@h") == "a\nhttp://***@h");
}

TEST_CASE("an http URI is checked whole: whitespace, control bytes, a host, a port, masked credentials",
          "[fast][common]") {
  CHECK(http_uri_problem("http://mlflow.internal:5000") == "");
  CHECK(http_uri_problem("https://u:p@[::1]:8443/prefix") == "");
  CHECK(http_uri_problem("http://h") == "");
  CHECK(http_uri_problem("http://a\nb") == "byte 8 is the control character \\x0a");
  CHECK(http_uri_problem("http://a b") == "byte 8 is a space");
  CHECK(http_uri_problem("http://x\x1b[31m") == "byte 8 is the control character \\x1b");
  CHECK(http_uri_problem("http://caf\xc3\xa9") == "byte 10 is not ASCII (percent-encode it)");
  CHECK(http_uri_problem("http://") == "no host after the scheme");
  CHECK(http_uri_problem("http://u:p@/x") == "no host after the scheme");
  CHECK(http_uri_problem("http://:5000") == "no host after the scheme");
  CHECK(http_uri_problem("http://h:0") == "port '0' is not a number in 1-65535");
  CHECK(http_uri_problem("http://h:99999") == "port '99999' is not a number in 1-65535");
  CHECK(http_uri_problem("http://h:") == "port '' is not a number in 1-65535");
  CHECK(http_uri_problem("http://[::1") == "the IPv6 host has no closing ']'");
  CHECK(http_uri_problem("ftp://h") == "expected an http:// or https:// address");
  CHECK_THAT(http_uri_problem("http://***@h:5000"), Catch::Contains("masked (***)"));
}

TEST_CASE("a URI's userinfo leaves the URL and becomes the user and password, percent-decoded", "[fast][common]") {
  const UriCredentials split = split_credentials("http://al%40ice:p%3Ass:w@h:5000/api/2.0?x=1");
  CHECK(split.present);
  CHECK(split.url == "http://h:5000/api/2.0?x=1");
  CHECK(split.user == "al@ice");
  CHECK(split.password == "p:ss:w");
  const UriCredentials none = split_credentials("http://h:5000/api");
  CHECK(!none.present);
  CHECK(none.url == "http://h:5000/api");
  CHECK(split_credentials("http://tok@h").user == "tok");
  CHECK(split_credentials("http://tok@h").password == "");
}
