#include "git/request.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "process/exec_json.hpp"

namespace sandfort::agent::git {
namespace {

using nlohmann::json;


constexpr std::array<std::pair<op, std::string_view>, 8> names = {{{op::clone, "clone"},
                                                                   {op::pull, "pull"},
                                                                   {op::push, "push"},
                                                                   {op::add, "add"},
                                                                   {op::commit, "commit"},
                                                                   {op::checkout, "checkout"},
                                                                   {op::branches, "branches"},
                                                                   {op::status, "status"}}};

constexpr std::array<std::string_view, 14> all_fields = {"path",    "url",   "branch", "remote",   "depth",
                                                         "message", "files", "author", "create",   "rebase",
                                                         "username", "password", "token", "timeout_s"};

// The fields each operation takes besides path and timeout_s.
std::vector<std::string_view> fields_of(op o) {
  switch (o) {
    case op::clone: return {"url", "branch", "depth", "username", "password", "token"};
    case op::pull: return {"remote", "branch", "rebase", "username", "password", "token"};
    case op::push: return {"remote", "branch", "username", "password", "token"};
    case op::add: return {"files"};
    case op::commit: return {"message", "author", "files"};
    case op::checkout: return {"branch", "create"};
    case op::branches:
    case op::status: return {};
  }
  return {};
}

bool has_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c == '\0' || c == '\n' || c == '\r'; });
}

// A string field: present, a string, not empty, no NUL or line break.
result<std::string> text(const json& j, const std::string& key) {
  const json& v = j.at(key);
  if (!v.is_string()) return invalid_argument(key + " must be a string");
  std::string s = v.get<std::string>();
  if (s.empty()) return invalid_argument(key + " must not be empty");
  if (has_control(s)) return invalid_argument(key + " must not contain NUL bytes or line breaks");
  return s;
}

// Names git would take for an option if they began with '-'.
result<std::string> name_field(const json& j, const std::string& key) {
  auto s = text(j, key);
  if (!s) return s;
  if ((*s)[0] == '-') return invalid_argument(key + " must not start with '-'");
  if (std::any_of(s->begin(), s->end(), [](char c) { return c == ' ' || c == '\t'; }))
    return invalid_argument(key + " must not contain whitespace");
  return s;
}

result<bool> flag_field(const json& j, const std::string& key) {
  if (!j.at(key).is_boolean()) return invalid_argument(key + " must be true or false");
  return j.at(key).get<bool>();
}

// A URL whose user part holds a password would be written to .git/config as it is.
bool url_has_password(std::string_view url) {
  auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return false;
  std::string_view rest = url.substr(scheme + 3);
  rest = rest.substr(0, std::min(rest.find('/'), rest.size()));
  auto at = rest.rfind('@');
  return at != std::string_view::npos && rest.substr(0, at).find(':') != std::string_view::npos;
}

result<identity> parse_author(const json& v) {
  identity who;
  if (v.is_string()) {
    auto parsed = parse_identity(v.get<std::string>());
    if (!parsed) return invalid_argument("author must be \"Name <email>\" or {\"name\", \"email\"}");
    who = *parsed;
  } else if (v.is_object()) {
    if (auto known = check_fields(v, {"name", "email"}); !known) return invalid_argument("author: " + known.err().message);
    if (!v.contains("name") || !v.contains("email")) return invalid_argument("author needs both name and email");
    auto name = text(v, "name");
    if (!name) return invalid_argument("author." + name.err().message);
    auto email = text(v, "email");
    if (!email) return invalid_argument("author." + email.err().message);
    who = {*name, *email};
  } else {
    return invalid_argument("author must be \"Name <email>\" or {\"name\", \"email\"}");
  }
  auto bad = [](const std::string& s) { return s.find_first_of("<>") != std::string::npos; };
  if (bad(who.name) || bad(who.email)) return invalid_argument("author name and email must not contain '<' or '>'");
  if (who.name.empty() || who.email.empty()) return invalid_argument("author needs both name and email");
  return who;
}

result<void> parse_credentials(const json& j, request& req) {
  bool has_user = j.contains("username"), has_pass = j.contains("password"), has_token = j.contains("token");
  if (!has_user && !has_pass && !has_token) return {};
  if (has_pass && has_token) return invalid_argument("give password or token, not both");
  if (!has_pass && !has_token) return invalid_argument("username needs a password or token");
  credentials c;
  const std::string secret_key = has_pass ? "password" : "token";
  // The messages never echo a value: these are secrets.
  const json& secret = j.at(secret_key);
  if (!secret.is_string() || secret.get<std::string>().empty())
    return invalid_argument(secret_key + " must be a non-empty string");
  c.password = secret.get<std::string>();
  if (has_control(c.password)) return invalid_argument(secret_key + " must not contain NUL bytes or line breaks");
  c.username = "git";  // a token alone: hosts accept it under any user name
  if (has_user) {
    auto user = text(j, "username");
    if (!user) return std::move(user).err();
    c.username = *user;
  }
  req.creds = std::move(c);
  return {};
}

}  // namespace

std::optional<op> parse_op(std::string_view name) {
  for (const auto& [o, n] : names)
    if (n == name) return o;
  return std::nullopt;
}

std::string_view to_string(op o) {
  for (const auto& [x, n] : names)
    if (x == o) return n;
  return "?";
}

bool uses_network(op o) { return o == op::clone || o == op::pull || o == op::push; }

std::optional<identity> parse_identity(std::string_view s) {
  auto open = s.rfind('<');
  if (open == std::string_view::npos || s.empty() || s.back() != '>') return std::nullopt;
  std::string_view name = s.substr(0, open);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  std::string_view email = s.substr(open + 1, s.size() - open - 2);
  if (name.empty() || email.empty()) return std::nullopt;
  return identity{std::string(name), std::string(email)};
}

result<request> parse_request(op o, std::string_view body) {
  auto parsed = parse_object(body);
  if (!parsed) return std::move(parsed).err();
  const json& j = *parsed;
  auto takes = fields_of(o);
  for (const auto& [key, value] : j.items()) {
    if (key == "path" || key == "timeout_s") continue;
    if (std::find(all_fields.begin(), all_fields.end(), key) == all_fields.end())
      return invalid_argument("unknown field '" + key + "'");
    if (std::find(takes.begin(), takes.end(), key) == takes.end())
      return invalid_argument(key + " does not apply to " + std::string(to_string(o)));
  }

  request req;
  req.operation = o;
  if (!j.contains("path")) return invalid_argument("path is required");
  auto path = text(j, "path");
  if (!path) return std::move(path).err();
  if ((*path)[0] != '/') return invalid_argument("path must be absolute");
  req.path = *path;

  if (j.contains("timeout_s")) {
    const json& t = j["timeout_s"];
    if (!t.is_number_integer() || t.get<std::int64_t>() < 1 || t.get<std::int64_t>() > 2'000'000)
      return invalid_argument("timeout_s must be an integer between 1 and 2000000");
    req.timeout = std::chrono::seconds(t.get<std::int64_t>());
  }
  if (j.contains("url")) {
    auto url = text(j, "url");
    if (!url) return std::move(url).err();
    if ((*url)[0] == '-') return invalid_argument("url must not start with '-'");
    if (url_has_password(*url))
      return invalid_argument("url must not carry a password (it would be written to .git/config): use username and password");
    req.url = *url;
  }
  for (const char* key : {"branch", "remote"}) {
    if (!j.contains(key)) continue;
    auto v = name_field(j, key);
    if (!v) return std::move(v).err();
    (std::string_view(key) == "branch" ? req.branch : req.remote) = *v;
  }
  if (j.contains("depth")) {
    const json& d = j["depth"];
    if (!d.is_number_integer() || d.get<std::int64_t>() < 1 || d.get<std::int64_t>() > 2147483647)
      return invalid_argument("depth must be an integer of at least 1");
    req.depth = static_cast<int>(d.get<std::int64_t>());
  }
  if (j.contains("message")) {
    const json& m = j["message"];
    if (!m.is_string() || m.get<std::string>().empty()) return invalid_argument("message must be a non-empty string");
    req.message = m.get<std::string>();
    if (req.message.find('\0') != std::string::npos) return invalid_argument("message must not contain NUL bytes");
  }
  if (j.contains("files")) {
    const json& f = j["files"];
    if (!f.is_array() || f.empty()) return invalid_argument("files must be a non-empty array of strings");
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (!f[i].is_string() || f[i].get<std::string>().empty())
        return invalid_argument("files[" + std::to_string(i) + "] must be a non-empty string");
      if (f[i].get<std::string>().find('\0') != std::string::npos)
        return invalid_argument("files[" + std::to_string(i) + "] must not contain NUL bytes");
      req.files.push_back(f[i].get<std::string>());
    }
  }
  if (j.contains("author")) {
    auto who = parse_author(j["author"]);
    if (!who) return std::move(who).err();
    req.author = *who;
  }
  for (const char* key : {"create", "rebase"}) {
    if (!j.contains(key)) continue;
    auto v = flag_field(j, key);
    if (!v) return std::move(v).err();
    (std::string_view(key) == "create" ? req.create : req.rebase) = *v;
  }
  if (auto c = parse_credentials(j, req); !c) return std::move(c).err();

  if (o == op::clone && req.url.empty()) return invalid_argument("url is required");
  if (o == op::commit && req.message.empty()) return invalid_argument("message is required");
  if (o == op::checkout && req.branch.empty()) return invalid_argument("branch is required");
  return req;
}

command build_command(const request& req, const std::string& askpass) {
  command c;
  c.argv = {"git", "-c", "credential.helper="};
  c.env = {{"GIT_TERMINAL_PROMPT", "0"}, {"GIT_ASKPASS", askpass}};
  c.cwd = req.operation == op::clone ? std::string() : req.path;
  auto& a = c.argv;
  // A branch named without a remote means the one the clone came from.
  const std::string remote = !req.remote.empty() ? req.remote : (req.branch.empty() ? "" : "origin");
  switch (req.operation) {
    case op::clone:
      a.push_back("clone");
      if (!req.branch.empty()) a.insert(a.end(), {"--branch", req.branch});
      if (req.depth) a.insert(a.end(), {"--depth", std::to_string(*req.depth)});
      a.insert(a.end(), {"--", req.url, req.path});
      break;
    case op::pull:
      a.insert(a.end(), {"pull", "--no-edit", req.rebase ? "--rebase" : "--no-rebase"});
      if (!remote.empty()) a.push_back(remote);
      if (!req.branch.empty()) a.push_back(req.branch);
      break;
    case op::push:
      // The current branch unless one is named; its upstream is set, so status counts
      // ahead/behind against it afterwards.
      a.insert(a.end(), {"push", "--set-upstream", remote.empty() ? "origin" : remote,
                         req.branch.empty() ? "HEAD" : req.branch});
      break;
    case op::add:
      a.push_back("add");
      if (req.files.empty()) a.push_back("--all");
      a.push_back("--");
      a.insert(a.end(), req.files.begin(), req.files.end());
      break;
    case op::commit:
      a.insert(a.end(), {"commit", "--message", req.message});
      if (req.author) {
        c.env["GIT_AUTHOR_NAME"] = req.author->name;
        c.env["GIT_AUTHOR_EMAIL"] = req.author->email;
        c.env["GIT_COMMITTER_NAME"] = req.author->name;
        c.env["GIT_COMMITTER_EMAIL"] = req.author->email;
      }
      if (!req.files.empty()) {
        a.push_back("--");
        a.insert(a.end(), req.files.begin(), req.files.end());
      }
      break;
    case op::checkout:
      if (req.create)
        a.insert(a.end(), {"checkout", "-b", req.branch});
      else
        a.insert(a.end(), {"checkout", req.branch, "--"});
      break;
    case op::branches:
      a.insert(a.end(), {"for-each-ref", "--format=%(HEAD)%00%(refname)%00%(objectname)%00%(upstream:short)",
                         "refs/heads", "refs/remotes"});
      break;
    case op::status:
      a.insert(a.end(), {"status", "--porcelain=v2", "--branch", "-z"});
      break;
  }
  return c;
}

}  // namespace sandfort::agent::git
