#include "sandfort/proxy/request.hpp"

#include "sandfort/core/base64.hpp"

#include <array>
#include <cstdint>

namespace sandfort::proxy {

namespace {

// A credential is an id and a 64-hex secret; anything much longer is not one of ours.
constexpr std::size_t max_authorization_length = 1024;


bool has_control(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

error bad_target(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }

result<egress_target> target_of_authority(std::string_view text, egress_target::kind mode) {
  auto where = parse_authority(text);
  if (!where) return bad_target("bad destination '" + std::string(text) + "': " + where.err().message);
  egress_target out;
  out.mode = mode;
  out.where = std::move(*where);
  out.host = normalize_host(out.where.host);
  if (out.host.empty()) return bad_target("the host is empty");
  return out;
}

// "http://host[:port][/path][?query]" → host, port (80 by default), "/path?query".
result<egress_target> parse_absolute_http(std::string_view target) {
  constexpr std::string_view scheme = "http://";
  if (target.size() < scheme.size() || !iequals_ascii(target.substr(0, scheme.size()), scheme))
    return bad_target("only http:// URIs are forwarded; use CONNECT for anything else");
  auto rest = target.substr(scheme.size());
  if (rest.find('#') != std::string_view::npos) return bad_target("a request target has no fragment");
  auto path_start = rest.find_first_of("/?");
  auto authority_text = rest.substr(0, path_start);
  std::string path = path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (path.front() == '?') path.insert(0, "/");
  bool has_port = authority_text.starts_with('[') ? authority_text.find("]:") != std::string_view::npos
                                                   : authority_text.find(':') != std::string_view::npos;
  std::string with_port(authority_text);
  if (!has_port) with_port += ":80";
  auto out = target_of_authority(with_port, egress_target::kind::forward);
  if (!out) return out;
  out->origin_target = std::move(path);
  std::string shown = out->where.ipv6_literal ? "[" + out->where.host + "]" : out->where.host;
  out->host_header = out->where.port == 80 ? shown : shown + ":" + std::to_string(out->where.port);
  return out;
}

}  // namespace

std::optional<proxy_credentials> parse_proxy_authorization(std::string_view value) {
  if (value.size() > max_authorization_length) return std::nullopt;
  constexpr std::string_view scheme = "basic";
  if (value.size() <= scheme.size() || !iequals_ascii(value.substr(0, scheme.size()), scheme)) return std::nullopt;
  auto rest = value.substr(scheme.size());
  if (rest.front() != ' ' && rest.front() != '\t') return std::nullopt;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  auto decoded = base64_decode(rest);
  if (!decoded) return std::nullopt;
  auto colon = decoded->find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == decoded->size()) return std::nullopt;
  proxy_credentials out{decoded->substr(0, colon), decoded->substr(colon + 1)};
  if (has_control(out.sandbox_id) || has_control(out.secret)) return std::nullopt;
  return out;
}

result<egress_target> parse_request_target(bool is_connect, std::string_view target) {
  if (is_connect) return target_of_authority(target, egress_target::kind::tunnel);
  if (target.starts_with('/') || target == "*")
    return bad_target("this is a proxy: send an absolute http:// URI or CONNECT host:port");
  return parse_absolute_http(target);
}

}  // namespace sandfort::proxy
