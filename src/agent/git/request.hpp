#pragma once
// The Git capability's requests: POST /git/{op} bodies → a checked request → the argv and
// environment of the one `git` command that carries it out. Pure functions: no processes, no
// HTTP (unit-tested on the host).

#include <nlohmann/json.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::agent::git {

enum class op { clone, pull, push, add, commit, checkout, branches, status };

// "clone" → op::clone; nullopt for anything else.
std::optional<op> parse_op(std::string_view name);
std::string_view to_string(op o);
// clone, pull and push talk to a remote: they take credentials and the longer timeout.
bool uses_network(op o);

struct identity {
  std::string name;
  std::string email;
};

// Username and password (or token) for one command. Never logged, never on disk: they go to
// git through a memfd (see credentials.hpp).
struct credentials {
  std::string username;
  std::string password;
};

struct request {
  op operation = op::status;
  std::string path;  // absolute: the repository (clone: where it goes)
  std::string url;                          // clone
  std::string branch;                       // clone, pull, push, checkout
  std::string remote;                       // pull, push ("origin" when a branch is named)
  std::optional<int> depth;                 // clone, >= 1
  std::string message;                      // commit
  std::vector<std::string> files;           // add, commit
  std::optional<identity> author;           // commit
  bool create = false;                      // checkout: a new branch
  bool rebase = false;                      // pull
  std::optional<credentials> creds;         // clone, pull, push
  std::optional<std::chrono::seconds> timeout;  // nullopt: the agent's maximum
};

// Checks one body for one operation: unknown fields, fields that do not apply to the
// operation, wrong types and bad values are invalid_argument errors naming the field.
result<request> parse_request(op o, std::string_view body);

// "Name <email>" → identity; nullopt when it is not of that shape.
std::optional<identity> parse_identity(std::string_view text);

struct command {
  std::vector<std::string> argv;           // argv[0] == "git"
  std::map<std::string, std::string> env;  // merged over the sandbox's environment
  std::string cwd;                         // empty: the agent's own
};

// The git command for a request. Every command gets `-c credential.helper=` (nothing is read
// from or stored in a helper) and GIT_TERMINAL_PROMPT=0 (git never waits for a terminal);
// askpass is the program git asks for a username or password (the agent itself).
command build_command(const request& req, const std::string& askpass);

}  // namespace sandfort::agent::git
