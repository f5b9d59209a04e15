#include "sandfort/proxy/rules.hpp"

#include <nlohmann/json.hpp>

#include "sandfort/proxy/policy.hpp"

namespace sandfort::proxy {

namespace {

bool rule_host_matches(std::string_view pattern, std::string_view host) {
  return host_allowed(std::vector<std::string>{std::string(pattern)}, host);
}

// How a 403 names the entry: the field, its index and the entry as the caller wrote it.
std::string name_pattern(std::string_view field, std::size_t index, std::string_view pattern) {
  return std::string(field) + "[" + std::to_string(index) + "] " + nlohmann::json(pattern).dump();
}

std::string name_rule(std::size_t index, const egress_rule& r) {
  nlohmann::json j = {{"host", r.host}};
  if (!r.methods.empty()) j["methods"] = r.methods;
  if (!r.paths.empty()) j["paths"] = r.paths;
  return "egress_rules[" + std::to_string(index) + "] " + j.dump();
}

bool restricts(const egress_rule& r) { return !r.methods.empty() || !r.paths.empty(); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The deny list first: it wins over every allow.
std::optional<egress_verdict> denied_host(const egress_rule_set& set, std::string_view host) {
  for (std::size_t i = 0; i < set.deny.size(); ++i)
    if (rule_host_matches(set.deny[i], host)) {
      auto rule = name_pattern("egress_deny", i, set.deny[i]);
      return egress_verdict{false, rule, "refused by " + rule + ": this sandbox may not reach " + std::string(host)};
    }
  return std::nullopt;
}

std::optional<egress_verdict> allowlisted(const egress_rule_set& set, std::string_view host) {
  for (std::size_t i = 0; i < set.allow.size(); ++i)
    if (rule_host_matches(set.allow[i], host))
      return egress_verdict{true, name_pattern("egress_allowlist", i, set.allow[i]), "allowed"};
  return std::nullopt;
}

egress_verdict not_allowed(std::string_view host) {
  return {false, "", "this sandbox may not reach " + std::string(host)};
}

}  // namespace

std::optional<std::string> normalize_request_path(std::string_view target) {
  auto query = target.find('?');
  auto raw = target.substr(0, query);
  if (raw.empty() || raw.front() != '/') return std::nullopt;
  std::string decoded;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '%') {
      if (i + 2 >= raw.size()) return std::nullopt;  // "%" or "%x" at the end
      int hi = hex_value(raw[i + 1]), lo = hex_value(raw[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
      // An encoded separator is one segment to some servers and two to others.
      if (c == '/') return std::nullopt;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\' || c == ';') return std::nullopt;
    decoded.push_back(c);
  }
  // Segments, with "", "." and ".." resolved (RFC 3986 5.2.4, plus empty segments dropped).
  std::vector<std::string_view> segments;
  std::string_view rest(decoded);
  rest.remove_prefix(1);
  bool trailing_slash = false;
  while (true) {
    auto slash = rest.find('/');
    auto segment = rest.substr(0, slash);
    bool last = slash == std::string_view::npos;
    if (segment == "..") {
      if (segments.empty()) return std::nullopt;  // above the root: no server agrees on where that is
      segments.pop_back();
    } else if (!segment.empty() && segment != ".") {
      segments.push_back(segment);
    }
    if (last) {
      trailing_slash = segment.empty() || segment == "." || segment == "..";
      break;
    }
    rest.remove_prefix(slash + 1);
  }
  std::string out;
  for (auto s : segments) out += "/" + std::string(s);
  if (out.empty() || trailing_slash) out += "/";
  return out;
}

bool path_pattern_matches(std::string_view pattern, std::string_view path) {
  // Glob with '*' only: greedy with one backtrack point (the last star seen).
  std::size_t p = 0, s = 0, star = std::string_view::npos, mark = 0;
  while (s < path.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = s;
    } else if (p < pattern.size() && pattern[p] == path[s]) {
      ++p;
      ++s;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      s = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

egress_verdict decide_request(const egress_rule_set& set, std::string_view host_raw, std::string_view method,
                              std::string_view target) {
  auto host = normalize_host(host_raw);
  if (auto d = denied_host(set, host)) return std::move(*d);
  if (auto a = allowlisted(set, host)) return std::move(*a);
  std::optional<std::string> path;
  bool path_computed = false;
  std::optional<egress_verdict> closest;  // a rule for this host that did not allow this request
  for (std::size_t i = 0; i < set.rules.size(); ++i) {
    const auto& r = set.rules[i];
    if (!rule_host_matches(r.host, host)) continue;
    bool method_ok = r.methods.empty();
    for (const auto& m : r.methods) method_ok = method_ok || m == method;
    bool path_ok = r.paths.empty();
    if (!path_ok) {
      if (!path_computed) path = normalize_request_path(target), path_computed = true;
      if (path)
        for (const auto& pattern : r.paths) path_ok = path_ok || path_pattern_matches(pattern, *path);
    }
    auto rule = name_rule(i, r);
    if (method_ok && path_ok) return {true, rule, "allowed"};
    if (!closest) {
      std::string what = !method_ok ? "method " + std::string(method)
                         : path     ? "path " + *path
                                    : std::string("a path that cannot be normalized");
      closest = egress_verdict{false, rule, "refused by " + rule + ": it does not allow " + what + " on " + host};
    }
  }
  if (closest) return std::move(*closest);
  return not_allowed(host);
}

egress_verdict decide_tunnel(const egress_rule_set& set, std::string_view host_raw) {
  auto host = normalize_host(host_raw);
  if (auto d = denied_host(set, host)) return std::move(*d);
  if (auto a = allowlisted(set, host)) return std::move(*a);
  std::optional<egress_verdict> restricting;
  for (std::size_t i = 0; i < set.rules.size(); ++i) {
    const auto& r = set.rules[i];
    if (!rule_host_matches(r.host, host)) continue;
    auto rule = name_rule(i, r);
    if (!restricts(r)) return {true, rule, "allowed"};
    if (!restricting)
      restricting = egress_verdict{false, rule,
                                   "refused by " + rule + ": its methods and paths can only be checked on requests "
                                   "the proxy can read, and the proxy does not intercept TLS to " + host +
                                   " (the rule needs interception; see docs/egress.md)",
                                   true};
  }
  if (restricting) return std::move(*restricting);
  return not_allowed(host);
}

namespace {

bool valid_host_pattern(std::string_view h) {
  if (h == "*") return true;
  auto rest = h.starts_with("*.") ? h.substr(2) : h;
  if (rest.empty() || rest.size() > 253) return false;
  for (char c : rest)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
      return false;
  return true;
}

bool valid_method(std::string_view m) {
  if (m.empty() || m.size() > 16) return false;
  for (char c : m)
    if (!(c >= 'A' && c <= 'Z')) return false;
  return true;
}

std::optional<std::string> path_pattern_problem(std::string_view p) {
  if (p.empty() || p.front() != '/') return "must start with '/'";
  if (p.size() > max_pattern_length) return "is longer than " + std::to_string(max_pattern_length) + " characters";
  for (char c : p) {
    if (c <= 0x20 || c >= 0x7f) return "must be printable ASCII without spaces";
    if (c == '%' || c == '?' || c == '#' || c == '\\' || c == ';')
      return "must not hold '%', '?', '#', '\\' or ';' (it is matched against the decoded path, without the query)";
  }
  std::string_view rest = p.substr(1);
  while (true) {
    auto slash = rest.find('/');
    auto segment = rest.substr(0, slash);
    if (segment == "." || segment == "..") return "must not hold '.' or '..' segments";
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (p.find("//") != std::string_view::npos) return "must not hold '//' (paths are matched with '//' collapsed)";
  return std::nullopt;
}

error invalid(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }

}  // namespace

result<void> validate_host_patterns(const std::vector<std::string>& patterns, std::string_view what,
                                    std::size_t max_entries) {
  if (patterns.size() > max_entries)
    return invalid(std::string(what) + " has more than " + std::to_string(max_entries) + " entries");
  for (const auto& h : patterns)
    if (!valid_host_pattern(h))
      return invalid(std::string(what) + " entry '" + h + "' must be a host name, '*.suffix' or '*'");
  return {};
}

result<void> validate_rule_set(const egress_rule_set& set) {
  if (auto r = validate_host_patterns(set.allow, "egress_allowlist", max_allow_entries); !r) return r;
  if (auto r = validate_host_patterns(set.deny, "egress_deny", max_deny_entries); !r) return r;
  if (set.rules.size() > max_rules)
    return invalid("egress_rules has more than " + std::to_string(max_rules) + " rules");
  for (std::size_t i = 0; i < set.rules.size(); ++i) {
    const auto& r = set.rules[i];
    auto at = "egress_rules[" + std::to_string(i) + "]";
    if (!valid_host_pattern(r.host)) return invalid(at + ".host must be a host name, '*.suffix' or '*'");
    if (r.methods.size() > max_rule_methods)
      return invalid(at + ".methods has more than " + std::to_string(max_rule_methods) + " entries");
    for (const auto& m : r.methods)
      if (!valid_method(m)) return invalid(at + ".methods entry '" + m + "' must be an upper-case method (GET, POST…)");
    if (r.paths.size() > max_rule_paths)
      return invalid(at + ".paths has more than " + std::to_string(max_rule_paths) + " entries");
    for (const auto& p : r.paths)
      if (auto problem = path_pattern_problem(p)) return invalid(at + ".paths entry " + *problem);
  }
  return {};
}

}  // namespace sandfort::proxy
