// See uri.h.
#include "common/uri.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace mpt {
namespace {

constexpr std::string_view kMask = "***";

bool ends_uri(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`';
}

// Where the authority (userinfo@host:port) that starts at `begin` ends.
size_t authority_end(std::string_view text, size_t begin) {
  size_t end = begin;
  while (end < text.size() && !ends_uri(text[end]) && text[end] != '/' && text[end] != '?' && text[end] != '#') ++end;
  return end;
}

bool names_a_secret(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  static constexpr std::array<std::string_view, 8> kSecrets = {"token",     "key", "pass",       "secret",
                                                               "signature", "sig", "credential", "auth"};
  return std::any_of(kSecrets.begin(), kSecrets.end(),
                     [&](std::string_view secret) { return lower.find(secret) != std::string::npos; });
}

// Appends the query and fragment that start at `begin` (at '?' or '#'), masking the values of secret parameters;
// returns where the URI ends.
size_t append_query(std::string& out, std::string_view text, size_t begin) {
  size_t end = begin;
  while (end < text.size() && !ends_uri(text[end])) ++end;
  while (end > begin + 1 && std::string_view(":,.;)]}").find(text[end - 1]) != std::string_view::npos) --end;
  const std::string_view rest = text.substr(begin, end - begin);
  const size_t fragment = std::min(rest.find('#'), rest.size());
  size_t i = 0;
  while (i < fragment) {  // '?' or '&' or ';', then name[=value]
    out += rest[i++];
    const size_t next = std::min(rest.find_first_of("&;#", i), fragment);
    const std::string_view pair = rest.substr(i, next - i);
    const size_t equals = pair.find('=');
    if (equals != std::string_view::npos && names_a_secret(pair.substr(0, equals)))
      out.append(pair.substr(0, equals + 1)).append(kMask);
    else
      out.append(pair);
    i = next;
  }
  out.append(rest.substr(fragment));
  return end;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

size_t scheme_length(std::string_view uri) {
  for (std::string_view scheme : {"http://", "https://"})
    if (uri.substr(0, scheme.size()) == scheme) return scheme.size();
  return 0;
}

std::string port_problem(std::string_view port) {
  const bool digits = !port.empty() && port.size() <= 5 &&
                      std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535)
    return fmt::format("port '{}' is not a number in 1-65535", port);
  return "";
}

}  // namespace

std::string redact_credentials(std::string_view text) {
  std::string out;
  size_t copied = 0;
  for (size_t mark = text.find("://"); mark != std::string_view::npos; mark = text.find("://", copied)) {
    const size_t begin = mark + 3, end = authority_end(text, begin);
    out.append(text.substr(copied, begin - copied));
    const std::string_view authority = text.substr(begin, end - begin);
    const size_t at = authority.rfind('@');
    if (at != std::string_view::npos && at > 0)
      out.append(kMask).append(authority.substr(at));
    else
      out.append(authority);
    copied = end;
    if (end < text.size() && (text[end] == '/' || text[end] == '?' || text[end] == '#')) {
      const size_t query = std::min(text.find_first_of("?#", end), text.size());
      size_t path_end = end;
      while (path_end < query && !ends_uri(text[path_end])) ++path_end;
      out.append(text.substr(end, path_end - end));
      copied = path_end;
      if (path_end == query && query < text.size()) copied = append_query(out, text, query);
    }
  }
  out.append(text.substr(copied));
  return out;
}

std::string http_uri_problem(std::string_view uri) {
  for (size_t i = 0; i < uri.size(); ++i) {
    const auto c = static_cast<unsigned char>(uri[i]);
    if (c == ' ') return fmt::format("byte {} is a space", i);
    if (c < 0x20 || c == 0x7f) return fmt::format("byte {} is the control character \\x{:02x}", i, c);
    if (c >= 0x80) return fmt::format("byte {} is not ASCII (percent-encode it)", i);
  }
  const size_t scheme = scheme_length(uri);
  if (scheme == 0) return "expected an http:// or https:// address";
  const std::string_view authority = uri.substr(scheme, authority_end(uri, scheme) - scheme);
  const size_t at = authority.rfind('@');
  const std::string_view userinfo = at == std::string_view::npos ? "" : authority.substr(0, at);
  if (userinfo.find(kMask) != std::string_view::npos)
    return "its credentials were masked (***) where mpt wrote it down; give them again, in the address or in "
           "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD";
  const std::string_view host_port = at == std::string_view::npos ? authority : authority.substr(at + 1);
  size_t host_end = host_port.find(':');
  if (!host_port.empty() && host_port.front() == '[') {  // an IPv6 literal: [::1]:5000
    const size_t close = host_port.find(']');
    if (close == std::string_view::npos) return "the IPv6 host has no closing ']'";
    host_end = close + 1 == host_port.size() ? std::string_view::npos : close + 1;
    if (host_end != std::string_view::npos && host_port[host_end] != ':')
      return "expected ':' and a port after the IPv6 host";
  }
  if (host_port.substr(0, host_end).empty()) return "no host after the scheme";
  if (host_end != std::string_view::npos) return port_problem(host_port.substr(host_end + 1));
  return "";
}

UriCredentials split_credentials(std::string_view uri) {
  UriCredentials out{std::string(uri), "", "", false};
  const size_t scheme = scheme_length(uri);
  if (scheme == 0) return out;
  const std::string_view authority = uri.substr(scheme, authority_end(uri, scheme) - scheme);
  const size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return out;
  const std::string_view userinfo = authority.substr(0, at);
  const size_t colon = userinfo.find(':');
  out.user = percent_decoded(userinfo.substr(0, colon));
  out.password = colon == std::string_view::npos ? "" : percent_decoded(userinfo.substr(colon + 1));
  out.url = std::string(uri.substr(0, scheme)) + std::string(uri.substr(scheme + at + 1));
  out.present = true;
  return out;
}

}  // namespace mpt
