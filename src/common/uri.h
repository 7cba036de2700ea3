// URIs that may carry credentials (http://user:password@host, ?token=...): masked wherever mpt shows or stores
// one, checked whole before anything is sent, and split so that the credentials travel as credentials.
#pragma once

#include <string>
#include <string_view>

namespace mpt {

// `text` with the userinfo of every scheme://userinfo@host in it replaced by "***", and the values of query
// parameters that name a secret (token, key, password, secret, signature, auth, credential) by "***".
std::string redact_credentials(std::string_view text);

// Why `uri` is not an http:// or https:// address mpt can send to: whitespace, a control or non-ASCII byte
// (naming its offset), no host, a port that is not 1-65535, credentials mpt itself masked; "" when it is one.
std::string http_uri_problem(std::string_view uri);

// An http(s) URI without its userinfo, and the userinfo's user and password, percent-decoded.
struct UriCredentials {
  std::string url;
  std::string user, password;
  bool present = false;  // the URI had a userinfo
};
UriCredentials split_credentials(std::string_view uri);

}  // namespace mpt
