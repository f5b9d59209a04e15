#pragma once
// A command_runner that plays iptables and ip6tables: it records every argv and keeps the
// filter table in memory, answering -N/-F/-X/-A/-I/-C/-D/-S with iptables' exit statuses.
// Failures are injected per command (fail_when) or per tool (missing).

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sandfort/firewall/host_firewall.hpp"

namespace sandfort::firewall::test {

using argv_t = std::vector<std::string>;

inline std::string joined(const argv_t& words, std::size_t from = 0) {
  std::string out;
  for (std::size_t i = from; i < words.size(); ++i) {
    if (!out.empty()) out += ' ';
    out += words[i];
  }
  return out;
}

class fake_iptables final : public command_runner {
 public:
  using chains = std::map<std::string, std::vector<std::string>>;  // chain → rule specs, in order

  fake_iptables() {
    for (const char* tool : {"iptables", "ip6tables"}) {
      auto& t = tables[tool];
      t["INPUT"] = {"-i lo -j ACCEPT"};  // something already there: ours must go in front
      t["FORWARD"] = {"-j DOCKER-USER"};
      t["OUTPUT"] = {};
      t["DOCKER-USER"] = {"-j RETURN"};
    }
  }

  result<int> run(const argv_t& argv, std::string* output) override {
    calls.push_back(argv);
    std::string out;
    auto status = answer(argv, out);
    if (output) *output = out;
    return status;
  }

  // The calls to one tool, as "op chain spec..." without the tool and -w.
  std::vector<std::string> calls_of(const std::string& tool) const {
    std::vector<std::string> out;
    for (const auto& c : calls)
      if (c[0] == tool) out.push_back(joined(c, 2));
    return out;
  }

  std::vector<argv_t> calls;
  std::map<std::string, chains> tables;  // "iptables", "ip6tables"
  std::set<std::string> missing;         // tools that cannot be run at all
  std::function<bool(const argv_t&)> fail_when;

 private:
  static bool builtin(const std::string& chain) { return chain == "INPUT" || chain == "FORWARD" || chain == "OUTPUT"; }
  static bool target(const std::string& name) { return name == "ACCEPT" || name == "DROP" || name == "REJECT" || name == "RETURN"; }

  static bool referenced(const chains& t, const std::string& chain) {
    for (const auto& [name, rules] : t)
      for (const auto& r : rules)
        if (r.ends_with("-j " + chain)) return true;
    return false;
  }

  result<int> answer(const argv_t& argv, std::string& out) {
    if (argv.empty()) return make_error(errc::invalid_argument, "empty argv");
    if (missing.count(argv[0])) return make_error(errc::unavailable, argv[0] + " not found");
    if (fail_when && fail_when(argv)) {
      out = "simulated failure\n";
      return 4;
    }
    if (argv.size() < 4 || argv[1] != "-w" || !tables.count(argv[0])) {
      out = "bad call\n";
      return 2;
    }
    chains& t = tables[argv[0]];
    const std::string& op = argv[2];
    const std::string& chain = argv[3];
    bool exists = t.count(chain) > 0;
    if (op == "-N") {
      if (exists) return fail(out, "Chain already exists.");
      t[chain];
      return 0;
    }
    if (!exists) return fail(out, "No chain/target/match by that name.");
    if (op == "-F") {
      t[chain].clear();
      return 0;
    }
    if (op == "-X") {
      if (builtin(chain) || !t[chain].empty() || referenced(t, chain)) return fail(out, "Directory not empty.");
      t.erase(chain);
      return 0;
    }
    if (op == "-S") {
      for (const auto& r : t[chain]) out += "-A " + chain + " " + r + "\n";
      return 0;
    }
    return rule_op(t, argv, out);
  }

  int rule_op(chains& t, const argv_t& argv, std::string& out) {
    const std::string& op = argv[2];
    auto& rules = t[argv[3]];
    std::size_t spec_from = op == "-I" ? 5 : 4;
    std::string spec = joined(argv, spec_from);
    auto jump = std::find(argv.begin(), argv.end(), "-j");
    if (jump == argv.end() || jump + 1 == argv.end()) return fail(out, "no target");
    if (!target(*(jump + 1)) && !t.count(*(jump + 1))) return fail(out, "Couldn't load target.");
    auto found = std::find(rules.begin(), rules.end(), spec);
    const char* no_rule = "Bad rule (does a matching rule exist in that chain?).";
    if (op == "-A") {
      rules.push_back(spec);
    } else if (op == "-I") {
      rules.insert(rules.begin(), spec);
    } else if (op == "-C") {
      if (found == rules.end()) return fail(out, no_rule);
    } else if (op == "-D") {
      if (found == rules.end()) return fail(out, no_rule);
      rules.erase(found);
    } else {
      return fail(out, "unknown option " + op);
    }
    return 0;
  }

  static int fail(std::string& out, const std::string& message) {
    out = "iptables: " + message + "\n";
    return 1;
  }
};

}  // namespace sandfort::firewall::test
