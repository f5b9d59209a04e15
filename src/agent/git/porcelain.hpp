#pragma once
// What git prints, read back: `git status --porcelain=v2 --branch -z` and the for-each-ref
// listing of `branches`. Pure functions (unit-tested on the host).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandfort::agent::git {

struct file_status {
  std::string path;
  std::string orig_path;  // renamed or copied: where it came from
  // One letter each, as git prints them: '.' unchanged, M modified, T type changed, A added,
  // D deleted, R renamed, C copied, U unmerged; '?' untracked, '!' ignored.
  char index = '.';
  char worktree = '.';
  std::string kind;  // "changed", "renamed", "unmerged", "untracked", "ignored"
};

struct status {
  std::optional<std::string> branch;    // nullopt: detached HEAD
  std::optional<std::string> commit;    // nullopt: no commit yet
  std::optional<std::string> upstream;  // nullopt: none set
  int ahead = 0;
  int behind = 0;
  std::vector<file_status> files;
};

// NUL-terminated records (-z). Records it does not know are skipped.
status parse_status(std::string_view porcelain_z);
nlohmann::json to_json(const status& s);

struct branch_info {
  std::string name;  // "main", or "origin/main" for a remote-tracking branch
  std::string commit;
  std::string upstream;  // empty: none
  bool current = false;
  bool remote = false;
};

// Lines of "<HEAD mark>\0<refname>\0<objectname>\0<upstream>" (see build_command); the
// remotes' symbolic HEADs are left out.
std::vector<branch_info> parse_branches(std::string_view listing);
// {"current": name or null, "branches": [{name, commit, upstream}], "remote_branches": [names]}
nlohmann::json branches_json(const std::vector<branch_info>& branches);

}  // namespace sandfort::agent::git
