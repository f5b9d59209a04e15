#include "git/porcelain.hpp"

#include <charconv>

namespace sandfort::agent::git {
namespace {

using nlohmann::json;

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    auto at = s.find(sep);
    if (at == std::string_view::npos) {
      out.push_back(s);
      break;
    }
    out.push_back(s.substr(0, at));
    s.remove_prefix(at + 1);
  }
  return out;
}

// The text after `count` space-separated fields (a path may hold spaces), or nullopt.
std::optional<std::string_view> after_fields(std::string_view record, int count) {
  for (int i = 0; i < count; ++i) {
    auto space = record.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    record.remove_prefix(space + 1);
  }
  return record;
}

int number(std::string_view s) {
  int n = 0;
  std::from_chars(s.data(), s.data() + s.size(), n);
  return n;
}

void header(std::string_view line, status& st) {
  auto space = line.find(' ');
  if (space == std::string_view::npos) return;
  std::string_view key = line.substr(0, space), value = line.substr(space + 1);
  if (key == "branch.oid") {
    if (value != "(initial)") st.commit = std::string(value);
  } else if (key == "branch.head") {
    if (value != "(detached)") st.branch = std::string(value);
  } else if (key == "branch.upstream") {
    st.upstream = std::string(value);
  } else if (key == "branch.ab") {
    auto parts = split(value, ' ');
    if (parts.size() == 2 && parts[0].size() > 1 && parts[1].size() > 1) {
      st.ahead = number(parts[0].substr(1));
      st.behind = number(parts[1].substr(1));
    }
  }
}

}  // namespace

status parse_status(std::string_view z) {
  status st;
  auto records = split(z, '\0');
  for (std::size_t i = 0; i < records.size(); ++i) {
    std::string_view r = records[i];
    if (r.size() < 2 || r[1] != ' ') continue;
    file_status f;
    switch (r[0]) {
      case '#':
        header(r.substr(2), st);
        continue;
      case '1':
      case '2':
      case 'u': {
        // "<kind> <XY> <sub> <mH> <mI> <mW> <hH> <hI> [<Xscore>] <path>"; unmerged: three
        // modes and three object names besides the worktree's mode.
        int fields = r[0] == '1' ? 8 : r[0] == '2' ? 9 : 10;
        auto path = after_fields(r, fields);
        if (!path || r.size() < 4) continue;
        f.index = r[2];
        f.worktree = r[3];
        f.path = std::string(*path);
        f.kind = r[0] == '1' ? "changed" : r[0] == '2' ? "renamed" : "unmerged";
        // A rename's or copy's source is the next record.
        if (r[0] == '2' && i + 1 < records.size()) f.orig_path = std::string(records[++i]);
        break;
      }
      case '?':
      case '!':
        f.index = f.worktree = r[0];
        f.path = std::string(r.substr(2));
        f.kind = r[0] == '?' ? "untracked" : "ignored";
        break;
      default:
        continue;
    }
    st.files.push_back(std::move(f));
  }
  return st;
}

json to_json(const status& s) {
  auto opt = [](const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); };
  json files = json::array();
  for (const auto& f : s.files) {
    json one = {{"path", f.path},
                {"index", std::string(1, f.index)},
                {"worktree", std::string(1, f.worktree)},
                {"kind", f.kind},
                {"staged", f.index != '.' && f.index != '?' && f.index != '!'}};
    if (!f.orig_path.empty()) one["orig_path"] = f.orig_path;
    files.push_back(std::move(one));
  }
  return {{"branch", opt(s.branch)}, {"commit", opt(s.commit)}, {"upstream", opt(s.upstream)},
          {"ahead", s.ahead},        {"behind", s.behind},      {"files", std::move(files)}};
}

std::vector<branch_info> parse_branches(std::string_view listing) {
  std::vector<branch_info> out;
  for (auto line : split(listing, '\n')) {
    auto f = split(line, '\0');
    if (f.size() < 3) continue;
    branch_info b;
    std::string_view ref = f[1];
    constexpr std::string_view heads = "refs/heads/", remotes = "refs/remotes/";
    if (ref.starts_with(heads)) {
      b.name = std::string(ref.substr(heads.size()));
    } else if (ref.starts_with(remotes)) {
      b.name = std::string(ref.substr(remotes.size()));
      b.remote = true;
      if (b.name.ends_with("/HEAD")) continue;
    } else {
      continue;
    }
    b.current = f[0] == "*";
    b.commit = std::string(f[2]);
    if (f.size() > 3) b.upstream = std::string(f[3]);
    out.push_back(std::move(b));
  }
  return out;
}

json branches_json(const std::vector<branch_info>& branches) {
  json current = nullptr, local = json::array(), remote = json::array();
  for (const auto& b : branches) {
    if (b.remote) {
      remote.push_back(b.name);
      continue;
    }
    if (b.current) current = b.name;
    local.push_back({{"name", b.name},
                     {"commit", b.commit},
                     {"upstream", b.upstream.empty() ? json(nullptr) : json(b.upstream)},
                     {"current", b.current}});
  }
  return {{"current", current}, {"branches", local}, {"remote_branches", remote}};
}

}  // namespace sandfort::agent::git
