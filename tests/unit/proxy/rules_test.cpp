// Egress rules on values alone: deny over allow, method and path rules, the normalized path a
// pattern sees (and the spellings that try to slip past it), CONNECT's fail-closed answer.

#include <catch2/catch.hpp>

#include "sandfort/proxy/rules.hpp"

using namespace sandfort;
using namespace sandfort::proxy;

namespace {

egress_rule_set github_rules() {
  egress_rule_set set;
  set.rules = {{"api.github.com", {"GET"}, {"/repos/acme/*"}}};
  return set;
}

bool allowed(const egress_rule_set& set, std::string_view host, std::string_view method, std::string_view target) {
  return decide_request(set, host, method, target).allowed;
}

}  // namespace

TEST_CASE("rules: a deny entry wins over '*' and over a rule for the same host", "[proxy][rules]") {
  egress_rule_set set;
  set.allow = {"*"};
  set.deny = {"*.evil.example", "blocked.example.com"};
  set.rules = {{"blocked.example.com", {}, {}}};
  CHECK(allowed(set, "ok.example.com", "GET", "/"));
  auto v = decide_request(set, "Blocked.Example.COM.", "GET", "/");
  CHECK_FALSE(v.allowed);
  CHECK(v.rule == "egress_deny[1] \"blocked.example.com\"");
  CHECK(v.message.find("egress_deny[1]") != std::string::npos);
  CHECK_FALSE(allowed(set, "a.b.evil.example", "GET", "/"));
  CHECK(allowed(set, "evil.example", "GET", "/"));  // "*." is subdomains only, as in the allowlist
  auto t = decide_tunnel(set, "blocked.example.com");
  CHECK_FALSE(t.allowed);
  CHECK(t.rule == "egress_deny[1] \"blocked.example.com\"");
}

TEST_CASE("rules: a method/path rule allows what it names and nothing else on that host", "[proxy][rules]") {
  auto set = github_rules();
  CHECK(allowed(set, "api.github.com", "GET", "/repos/acme/widget"));
  CHECK(allowed(set, "api.github.com", "GET", "/repos/acme/widget/pulls?state=open"));
  CHECK_FALSE(allowed(set, "api.github.com", "POST", "/repos/acme/widget"));
  CHECK_FALSE(allowed(set, "api.github.com", "get", "/repos/acme/widget"));  // methods are case-sensitive
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/other/widget"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme"));  // the pattern needs "/repos/acme/"
  CHECK_FALSE(allowed(set, "github.com", "GET", "/repos/acme/widget"));
  auto refused = decide_request(set, "api.github.com", "DELETE", "/repos/acme/widget");
  CHECK(refused.rule == R"(egress_rules[0] {"host":"api.github.com","methods":["GET"],"paths":["/repos/acme/*"]})");
  CHECK(refused.message.find("method DELETE") != std::string::npos);
  auto nothing = decide_request(set, "example.org", "GET", "/");
  CHECK_FALSE(nothing.allowed);
  CHECK(nothing.rule.empty());
}

TEST_CASE("rules: the allowlist allows every method and path, a later rule decides only what it names",
          "[proxy][rules]") {
  egress_rule_set set;
  set.allow = {"pypi.org"};
  set.rules = {{"*.github.com", {"GET", "HEAD"}, {}}, {"uploads.github.com", {}, {"/upload/*"}}};
  CHECK(allowed(set, "pypi.org", "DELETE", "/anything"));
  CHECK(allowed(set, "api.github.com", "HEAD", "/x"));
  CHECK_FALSE(allowed(set, "api.github.com", "PUT", "/x"));
  // The second rule allows what the first does not: any one rule allowing is enough.
  CHECK(allowed(set, "uploads.github.com", "POST", "/upload/a"));
  CHECK_FALSE(allowed(set, "uploads.github.com", "POST", "/other"));
}

TEST_CASE("rules: path tricks do not get past a pattern", "[proxy][rules]") {
  auto set = github_rules();
  // Dot segments, raw and encoded, resolve before matching.
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/../other/x"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/%2e%2e/other/x"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/%2E%2E/other/x"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/.%2e/other/x"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/x/../../other/x"));
  // An encoded slash or backslash, path parameters, NUL: no pattern matches them.
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme%2f..%2fother/x"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/%2F../other"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/..\\other"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/%5c..%5cother"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/..;/other/x"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/x%00"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/x%zz"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/repos/acme/x%2"));
  // Above the root.
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/../repos/acme/x"));
  // Double slashes collapse: both ways a server might read them.
  CHECK(allowed(set, "api.github.com", "GET", "//repos//acme//x"));
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "//repos//other//acme/x"));
  // Encoded ordinary characters decode to the same path.
  CHECK(allowed(set, "api.github.com", "GET", "/repos/%61cme/x"));
  // Paths are case-sensitive: another spelling is refused, never widened.
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/REPOS/acme/x"));
  // Host case and the trailing dot do not change the host.
  CHECK(allowed(set, "API.GitHub.COM.", "GET", "/repos/acme/x"));
  // The query is not the path.
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "/other?x=/repos/acme/y"));
  // Not origin-form.
  CHECK_FALSE(allowed(set, "api.github.com", "GET", "*"));
}

TEST_CASE("rules: normalize_request_path", "[proxy][rules]") {
  CHECK(normalize_request_path("/") == "/");
  CHECK(normalize_request_path("/a/b?q=1") == "/a/b");
  CHECK(normalize_request_path("/a/./b/../c") == "/a/c");
  CHECK(normalize_request_path("/a//b///c") == "/a/b/c");
  CHECK(normalize_request_path("/a/b/") == "/a/b/");
  CHECK(normalize_request_path("/a/b/..") == "/a/");
  CHECK(normalize_request_path("/%41%62") == "/Ab");
  CHECK_FALSE(normalize_request_path("/..").has_value());
  CHECK_FALSE(normalize_request_path("/a/%2fb").has_value());
  CHECK_FALSE(normalize_request_path("/a\\b").has_value());
  CHECK_FALSE(normalize_request_path("/a;b").has_value());
  CHECK_FALSE(normalize_request_path("/a%0a").has_value());
  CHECK_FALSE(normalize_request_path("a/b").has_value());
  CHECK_FALSE(normalize_request_path("").has_value());
}

TEST_CASE("rules: path patterns", "[proxy][rules]") {
  CHECK(path_pattern_matches("/repos/acme/*", "/repos/acme/x"));
  CHECK(path_pattern_matches("/repos/acme/*", "/repos/acme/x/y/z"));
  CHECK(path_pattern_matches("/repos/acme/*", "/repos/acme/"));
  CHECK_FALSE(path_pattern_matches("/repos/acme/*", "/repos/acme"));
  CHECK(path_pattern_matches("/a/*/c", "/a/b/c"));
  CHECK(path_pattern_matches("/a/*/c", "/a/b/x/c"));
  CHECK_FALSE(path_pattern_matches("/a/*/c", "/a/b/c/d"));
  CHECK(path_pattern_matches("/exact", "/exact"));
  CHECK_FALSE(path_pattern_matches("/exact", "/exactly"));
  CHECK(path_pattern_matches("*", "/anything"));
  CHECK(path_pattern_matches("/a*b*c", "/aXbYbZc"));
}

TEST_CASE("rules: CONNECT is refused when only method/path rules allow the host", "[proxy][rules]") {
  auto set = github_rules();
  auto v = decide_tunnel(set, "api.github.com");
  CHECK_FALSE(v.allowed);
  CHECK(v.needs_interception);
  CHECK(v.rule.starts_with("egress_rules[0]"));
  CHECK(v.message.find("needs interception") != std::string::npos);
  set.rules.push_back({"api.github.com", {}, {}});  // a host-only rule is an allow
  CHECK(decide_tunnel(set, "api.github.com").allowed);
  egress_rule_set listed;
  listed.allow = {"api.github.com"};
  listed.rules = github_rules().rules;
  CHECK(decide_tunnel(listed, "api.github.com").allowed);
  CHECK_FALSE(decide_tunnel(egress_rule_set{}, "example.com").allowed);
  CHECK_FALSE(decide_tunnel(egress_rule_set{}, "example.com").needs_interception);
}

TEST_CASE("rules: validation and bounds", "[proxy][rules]") {
  CHECK(validate_rule_set(github_rules()).ok());
  egress_rule_set set;
  set.deny = {"bad host"};
  CHECK_FALSE(validate_rule_set(set).ok());
  set.deny = {"*.ok.example"};
  CHECK(validate_rule_set(set).ok());
  auto with_path = [](std::string p) {
    egress_rule_set s;
    s.rules = {{"h.example", {}, {std::move(p)}}};
    return validate_rule_set(s).ok();
  };
  CHECK(with_path("/a/*"));
  CHECK_FALSE(with_path("a/*"));
  CHECK_FALSE(with_path("/a/../b"));
  CHECK_FALSE(with_path("/a/./b"));
  CHECK_FALSE(with_path("/a//b"));
  CHECK_FALSE(with_path("/a%2fb"));
  CHECK_FALSE(with_path("/a?b"));
  CHECK_FALSE(with_path("/a;b"));
  CHECK_FALSE(with_path("/a b"));
  CHECK_FALSE(with_path("/" + std::string(max_pattern_length, 'a')));
  egress_rule_set methods;
  methods.rules = {{"h.example", {"get"}, {}}};
  CHECK_FALSE(validate_rule_set(methods).ok());
  methods.rules = {{"h.example", {"GET", "PATCH"}, {}}};
  CHECK(validate_rule_set(methods).ok());
  egress_rule_set many;
  many.rules.assign(max_rules + 1, egress_rule{"h.example", {}, {}});
  CHECK_FALSE(validate_rule_set(many).ok());
  egress_rule_set bad_host;
  bad_host.rules = {{"h/x", {}, {}}};
  CHECK_FALSE(validate_rule_set(bad_host).ok());
}
