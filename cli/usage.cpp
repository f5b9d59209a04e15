#include "usage.hpp"

#include <algorithm>
#include <utility>

#include "failure.hpp"

namespace sandfort::cli {

namespace {

// "sandfort sandbox create": how the user reached this command.
std::string command_path(const CLI::App& cmd) {
  std::string path = cmd.get_name();
  for (const CLI::App* up = cmd.get_parent(); up; up = up->get_parent()) path = up->get_name() + " " + path;
  return path;
}

std::vector<const CLI::App*> commands_of(const CLI::App& cmd) {
  return cmd.get_subcommands([](const CLI::App*) { return true; });
}

// Names and aliases, in the order they were registered.
std::vector<std::string> command_names(const CLI::App& cmd, bool with_aliases) {
  std::vector<std::string> names;
  for (const CLI::App* sub : commands_of(cmd)) {
    names.push_back(sub->get_name());
    if (with_aliases)
      for (const auto& alias : sub->get_aliases()) names.push_back(alias);
  }
  return names;
}

std::vector<std::string> option_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::string join(const std::vector<std::string>& words, const std::string& quote) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i) out += i + 1 == words.size() ? " or " : ", ";
    out += quote + words[i] + quote;
  }
  return out;
}

std::string list(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string unknown_command(const CLI::App& cmd, const std::string& typed) {
  std::string text = command_path(cmd) + ": unknown command \"" + typed + "\"";
  auto near = near_matches(typed, command_names(cmd, true));
  if (!near.empty()) text += "; did you mean " + join(near, "\"") + "?";
  text += "\nCommands: " + list(command_names(cmd, false)) + " (`" + command_path(cmd) + " --help` says what each does)";
  return text;
}

std::string missing_command(const CLI::App& cmd) {
  return command_path(cmd) + ": a command is needed: " + list(command_names(cmd, false)) + " (`" + command_path(cmd) +
         " --help` says what each does)";
}

std::string unknown_option(const CLI::App& cmd, const std::string& typed, const std::string& more = "") {
  std::string text = command_path(cmd) + ": unknown option " + typed;
  auto near = near_matches(typed, option_names(cmd));
  if (!near.empty()) text += "; did you mean " + join(near, "") + "?";
  return text + " (`" + command_path(cmd) + " --help` lists its options" + more + ")";
}

// The option `arg` names ("--cpus=2" names --cpus; "-ofile" names -o), or null.
const CLI::Option* option_named(const CLI::App& cmd, const std::string& arg) {
  std::string name = arg.substr(0, arg.find('='));
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->get_positional() && opt->get_lnames().empty() && opt->get_snames().empty()) continue;
    if (opt->check_name(name)) return opt;
    if (!name.starts_with("--") && name.size() > 2 && opt->check_name(name.substr(0, 2))) return opt;
  }
  return nullptr;
}

bool takes_value(const CLI::Option& opt) { return opt.get_type_size_max() > 0; }

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // d[i][j]: distance between the first i characters of a and the first j of b.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::vector<std::string> near_matches(std::string_view typed, const std::vector<std::string>& candidates) {
  auto bare = [](std::string_view s) {
    while (!s.empty() && s.front() == '-') s.remove_prefix(1);
    return s;
  };
  std::string_view t = bare(typed);
  if (t.size() < 2) return {};  // every one-letter option is one edit away from any other
  // One edit in a short word already makes most words of three letters; two in longer ones.
  const std::size_t allowed = t.size() <= 3 ? 1 : 2;
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& c : candidates) {
    std::string_view b = bare(c);
    if (b.empty()) continue;
    std::size_t d = edit_distance(t, b);
    // A start of the word, or the word with something after it (--cpus2, sandboxes).
    bool prefix = (t.size() >= 2 && b.starts_with(t)) || (b.size() >= 2 && t.starts_with(b));
    if (d <= allowed || prefix) scored.emplace_back(prefix ? std::min<std::size_t>(d, 1) : d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, c] : scored)
    if (std::find(out.begin(), out.end(), c) == out.end() && out.size() < 3) out.push_back(std::move(c));
  return out;
}

std::string explain_usage_error(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* cmd = &app;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return {};
    if (arg.size() > 1 && arg.front() == '-') {
      const CLI::Option* opt = option_named(*cmd, arg);
      if (!opt) return unknown_option(*cmd, arg.substr(0, arg.find('=')));
      if (takes_value(*opt) && arg.find('=') == std::string::npos && (arg.starts_with("--") || arg.size() == 2)) ++i;
      continue;
    }
    if (commands_of(*cmd).empty()) continue;  // an argument of the command
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : commands_of(*cmd))
      if (sub->check_name(arg)) next = sub;
    if (!next) return unknown_command(*cmd, arg);
    cmd = next;
    if (cmd->get_prefix_command()) return {};  // the rest is the sandbox's command
  }
  if (!commands_of(*cmd).empty() && cmd->get_require_subcommand_min() > 0) return missing_command(*cmd);
  return {};
}

void refuse_unknown_option(const CLI::App& cmd, const std::vector<std::string>& rest) {
  if (rest.empty() || rest.front() == "--" || rest.front().size() < 2 || rest.front().front() != '-') return;
  throw failure(unknown_option(cmd, rest.front().substr(0, rest.front().find('=')),
                               "; a command that starts with - goes after --"),
                2);
}

}  // namespace sandfort::cli
