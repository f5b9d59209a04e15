#pragma once
// A sandbox's egress rules beyond the host allowlist (docs/egress.md): host deny patterns that win
// over every allow, and rules that allow a host only for some methods and paths. Pure functions
// of (host, method, path), so the plain-HTTP forwarder checks each request with them and TLS
// interception, once wired, can call the same decide_request on each decrypted request.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::proxy {

// {"host": "api.github.com", "methods": ["GET"], "paths": ["/repos/acme/*"]}. Empty methods: any
// method; empty paths: any path. The host is a pattern as in the allowlist ("name", "*.suffix",
// "*").
struct egress_rule {
  std::string host;
  std::vector<std::string> methods;
  std::vector<std::string> paths;
};

struct egress_rule_set {
  std::vector<std::string> allow;  // the allowlist: any method, any path
  std::vector<std::string> deny;   // host patterns refused whatever allows them
  std::vector<egress_rule> rules;
};

// Bounds on what a caller may store (docs/egress.md, "Bounds").
inline constexpr std::size_t max_allow_entries = 256;
inline constexpr std::size_t max_deny_entries = 256;
inline constexpr std::size_t max_rules = 64;
inline constexpr std::size_t max_rule_methods = 16;
inline constexpr std::size_t max_rule_paths = 32;
inline constexpr std::size_t max_pattern_length = 256;

struct egress_verdict {
  bool allowed = false;
  // The entry that decided, as the 403 body names it: `egress_deny[0] "evil.example.com"`,
  // `egress_rules[1] {...}`, or empty when nothing matched the host at all.
  std::string rule;
  // For the client and the log: one sentence.
  std::string message;
  // A CONNECT to a host that only method/path rules allow: those need the request in the clear.
  bool needs_interception = false;
};

// A request whose method and path the proxy can see (plain http://, or intercepted HTTPS).
// `target` is the origin-form request target ("/path?query"); the query is not matched.
egress_verdict decide_request(const egress_rule_set& set, std::string_view host, std::string_view method,
                              std::string_view target);
// A CONNECT tunnel: the host only. Allowed by the allowlist or by a rule with neither methods nor
// paths; a host that only restricting rules allow is refused (fail-closed until interception).
egress_verdict decide_tunnel(const egress_rule_set& set, std::string_view host);

// The path a pattern is matched against: query dropped, percent-decoded once, "//" collapsed,
// "." and ".." segments resolved. nullopt when no pattern may match it: a malformed escape, an
// encoded or literal '\', an encoded '/', a NUL or other control character, a ';' (path
// parameters, which some servers strip before routing: "/a/..;/b"), a ".." above the root, or a
// target not starting with '/'.
std::optional<std::string> normalize_request_path(std::string_view target);
// `*` matches any run of characters, '/' included; everything else matches itself, case-sensitively.
bool path_pattern_matches(std::string_view pattern, std::string_view normalized_path);

// Host patterns of an allowlist or deny list: "host", "*.suffix" or "*" (`what` names the field
// in the message).
result<void> validate_host_patterns(const std::vector<std::string>& patterns, std::string_view what,
                                    std::size_t max_entries);
// The whole set, with the bounds above. Methods are upper-case tokens; a path pattern starts with
// '/', is printable ASCII without '%', '?', '#', '\\' or ';', and has no "." or ".." segment.
result<void> validate_rule_set(const egress_rule_set& set);

}  // namespace sandfort::proxy
