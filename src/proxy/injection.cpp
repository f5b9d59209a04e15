#include "sandfort/proxy/injection.hpp"

#include <algorithm>
#include <array>

#include "sandfort/core/base64.hpp"
#include "sandfort/proxy/policy.hpp"
#include "header_names.hpp"

namespace sandfort::proxy {

namespace bhttp = boost::beast::http;

namespace {

// A value that would break the line it is put in (CR, LF, NUL, ...) is never put in a header.
bool header_safe(std::string_view v) {
  return std::none_of(v.begin(), v.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

std::string replaced(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t at = 0;
  for (auto hit = text.find(from); hit != std::string_view::npos; hit = text.find(from, at)) {
    out.append(text.substr(at, hit - at)).append(to);
    at = hit + from.size();
  }
  return out.append(text.substr(at));
}

int query_hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Query decoding ('+' is a space in form encoding); nullopt for a malformed escape.
std::optional<std::string> query_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = query_hex_digit(s[i + 1]), lo = query_hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The target with the placement's parameter set to the value where it holds the placeholder.
bool inject_query(std::string& target, const injected_secret& s) {
  auto q = target.find('?');
  if (q == std::string::npos) return false;
  std::string out = target.substr(0, q + 1);
  std::string_view rest = std::string_view(target).substr(q + 1);
  bool done = false;
  bool first = true;
  while (true) {
    auto amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    auto eq = pair.find('=');
    if (!first) out.push_back('&');
    first = false;
    if (eq != std::string_view::npos) {
      auto key = query_decode(pair.substr(0, eq));
      auto val = query_decode(pair.substr(eq + 1));
      if (key && val && *key == s.placement.query && *val == s.placeholder) {
        out.append(pair.substr(0, eq + 1)).append(percent_encode(s.value));
        done = true;
      } else {
        out.append(pair);
      }
    } else {
      out.append(pair);
    }
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  if (done) target = std::move(out);
  return done;
}

// Headers for this hop only (RFC 9110 7.6.1) and the proxy's own.
bool hop_by_hop(std::string_view name) {
  static constexpr std::array<std::string_view, 8> names{"connection", "keep-alive", "proxy-authorization",
                                                         "proxy-authenticate", "proxy-connection", "te",
                                                         "upgrade", "trailer"};
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

bool bound_to(const injected_secret& secret, std::string_view host) {
  // A secret's hosts never hold "*" (docs/secrets.md); refused here too, whatever the row says.
  if (std::find(secret.hosts.begin(), secret.hosts.end(), "*") != secret.hosts.end()) return false;
  return host_allowed(secret.hosts, host);
}

bool any_bound_to(const std::vector<injected_secret>& secrets, std::string_view host) {
  return std::any_of(secrets.begin(), secrets.end(), [&](const auto& s) { return bound_to(s, host); });
}

std::string percent_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 15]);
    }
  }
  return out;
}

upstream_request intercepted_request_head(const bhttp::request_header<>& head, std::string_view host,
                                          std::string_view host_header, const std::vector<injected_secret>& secrets) {
  upstream_request out;
  // Headers as (name, value), the hop-by-hop ones (and those Connection names) left out.
  auto named = detail::connection_tokens(head);
  std::vector<std::pair<std::string, std::string>> fields;
  bool has_host = false;
  bool bound = false;
  for (const auto& field : head) {
    auto name = detail::ascii_lower(field.name_string());
    if (hop_by_hop(name)) continue;
    if (!detail::is_framing(name) && std::find(named.begin(), named.end(), name) != named.end()) continue;
    if (name == "host") has_host = true;
    fields.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  std::string target(head.target());
  for (const auto& s : secrets) {
    if (!bound_to(s, host)) continue;
    bound = true;
    bool put = false;
    switch (s.placement.type) {
      case secrets::placement::kind::header: {
        if (!header_safe(s.value)) break;
        auto wanted = detail::ascii_lower(s.placement.header);
        for (auto& [name, value] : fields)
          if (detail::ascii_lower(name) == wanted && value.find(s.placeholder) != std::string::npos) {
            value = replaced(s.placement.format, "{value}", s.value);
            put = true;
          }
        break;
      }
      case secrets::placement::kind::query:
        put = inject_query(target, s);
        break;
      case secrets::placement::kind::basic_auth:
        for (auto& [name, value] : fields) {
          if (detail::ascii_lower(name) != "authorization") continue;
          std::string_view v = detail::trim_ows(value);
          if (v.size() < 6 || detail::ascii_lower(v.substr(0, 6)) != "basic ") continue;
          auto decoded = base64_decode(detail::trim_ows(v.substr(6)));
          if (!decoded) continue;
          auto colon = decoded->find(':');
          if (colon == std::string::npos || decoded->substr(colon + 1) != s.placeholder) continue;
          value = "Basic " + base64_encode(s.placement.username + ":" + s.value);
          put = true;
        }
        break;
    }
    if (put) out.injected.push_back(s.name);
  }
  out.head = std::string(head.method_string()) + " " + target + " HTTP/1.1\r\n";
  if (!has_host) out.head += "Host: " + std::string(host_header) + "\r\n";
  for (const auto& [name, value] : fields) {
    if (bound && detail::ascii_lower(name) == "accept-encoding") continue;
    out.head += name + ": " + value + "\r\n";
  }
  if (bound) out.head += "Accept-Encoding: identity\r\n";
  out.head += "\r\n";
  return out;
}

replacements response_replacements(const std::vector<injected_secret>& secrets, std::string_view host) {
  replacements r;
  for (const auto& s : secrets) {
    if (s.value.empty() || !bound_to(s, host)) continue;
    r.emplace_back(s.value, s.placeholder);
    // Basic credentials travel encoded: an echo of the header carries base64(user:value).
    if (s.placement.type == secrets::placement::kind::basic_auth)
      r.emplace_back(base64_encode(s.placement.username + ":" + s.value),
                     base64_encode(s.placement.username + ":" + s.placeholder));
  }
  return r;
}

std::string replace_values(std::string_view text, const replacements& r) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t best = std::string_view::npos;
    const std::pair<std::string, std::string>* which = nullptr;
    for (const auto& pair : r) {
      auto hit = text.find(pair.first, at);
      if (hit != std::string_view::npos && (hit < best || (hit == best && pair.first.size() > which->first.size()))) {
        best = hit;
        which = &pair;
      }
    }
    if (!which) break;
    out.append(text.substr(at, best - at)).append(which->second);
    at = best + which->first.size();
  }
  if (at < text.size()) out.append(text.substr(at));
  return out;
}

stream_rewriter::stream_rewriter(replacements r) : r_(std::move(r)) {
  for (const auto& pair : r_) keep_ = std::max(keep_, pair.first.size() - 1);
}

std::string stream_rewriter::feed(std::string_view piece) {
  pending_.append(piece);
  if (pending_.size() <= keep_) return {};
  // Rewritten up to where no value can begin that the next piece could complete: a match that
  // starts before size - keep lies wholly in what is pending.
  std::string out;
  std::size_t at = 0;
  const std::size_t settled = pending_.size() - keep_;
  while (at < settled) {
    std::size_t best = std::string::npos;
    const std::pair<std::string, std::string>* which = nullptr;
    for (const auto& pair : r_) {
      auto hit = pending_.find(pair.first, at);
      if (hit != std::string::npos && hit < settled &&
          (hit < best || (hit == best && pair.first.size() > which->first.size()))) {
        best = hit;
        which = &pair;
      }
    }
    if (!which) {
      out.append(pending_, at, settled - at);
      at = settled;
      break;
    }
    out.append(pending_, at, best - at).append(which->second);
    at = best + which->first.size();
  }
  pending_.erase(0, at);
  return out;
}

std::string stream_rewriter::finish() {
  auto out = replace_values(pending_, r_);
  pending_.clear();
  return out;
}

}  // namespace sandfort::proxy
