#include "sandfort/firewall/host_firewall.hpp"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <utility>

namespace sandfort::firewall {
namespace {

using rule = std::vector<std::string>;

constexpr std::size_t max_interface_name = 15;  // IFNAMSIZ - 1


bool interface_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) {
    if (!line.empty()) line += ' ';
    line += a;
  }
  return line;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

error failed(const std::vector<std::string>& argv, int status, const std::string& output) {
  return make_error(errc::internal,
                    "`" + command_line(argv) + "` failed (exit " + std::to_string(status) + "): " + trimmed(output));
}

}  // namespace

result<void> validate(const rule_set& rules) {
  const std::string& b = rules.bridge;
  if (b.empty() || b.size() > max_interface_name)
    return invalid_argument("bridge must be an interface name of 1 to 15 characters, not '" + b + "'");
  for (char c : b) {
    if (!interface_char(c)) return invalid_argument("bridge '" + b + "' may only hold the characters A-Z a-z 0-9 _ . -");
  }
  // The kernel refuses "." and ".."; a leading '-' would read as an option to iptables.
  if (b == "." || b == ".." || b.front() == '-') return invalid_argument("bridge '" + b + "' is not a usable interface name");
  in_addr addr{};
  if (::inet_pton(AF_INET, rules.gateway.c_str(), &addr) != 1)
    return invalid_argument("gateway must be an IPv4 address like 10.0.0.1, not '" + rules.gateway + "'");
  if (rules.proxy_port == 0) return invalid_argument("proxy_port must be between 1 and 65535");
  return {};
}

std::string input_chain(std::string_view bridge) { return "SANDFORT-IN-" + std::string(bridge); }
std::string forward_chain(std::string_view bridge) { return "SANDFORT-FW-" + std::string(bridge); }

host_firewall::host_firewall(command_runner& runner, rule_set rules) : runner_(runner), rules_(std::move(rules)) {}

bool host_firewall::created() const {
  return v4_.input_jump || v4_.forward_jump || v6_.input_jump || v6_.forward_jump;
}

result<void> host_firewall::install() {
  if (auto valid = validate(rules_); !valid) return valid;
  if (auto v4 = install_family(family::ipv4); !v4) return v4;
  if (auto v6 = install_family(family::ipv6); !v6)
    spdlog::warn("firewall: IPv6 rules for {} not installed, continuing with IPv4 only: {}", rules_.bridge,
                 v6.err().message);
  return {};
}

result<void> host_firewall::remove() {
  // IPv6 first: a failure there is only logged, and must not stop the IPv4 clean-up.
  if (auto v6 = remove_family(family::ipv6); !v6)
    spdlog::warn("firewall: IPv6 rules for {} not removed: {}", rules_.bridge, v6.err().message);
  return remove_family(family::ipv4);
}

// Chains first, then the jumps: a jump to a chain still being filled would let traffic
// through the half-built chain.
result<void> host_firewall::install_family(family f) {
  added& mine = added_for(f);
  const std::string in = input_chain(rules_.bridge);
  const std::string fw = forward_chain(rules_.bridge);
  if (auto r = ensure_chain(f, in, input_rules(f), mine.input_chain); !r) return r;
  if (auto r = ensure_chain(f, fw, forward_rules(f), mine.forward_chain); !r) return r;
  if (auto r = ensure_jump(f, "INPUT", in, mine.input_jump); !r) return r;
  return ensure_jump(f, "FORWARD", fw, mine.forward_jump);
}

// Jumps first: a chain that is still referenced cannot be deleted.
result<void> host_firewall::remove_family(family f) {
  added& mine = added_for(f);
  const std::string in = input_chain(rules_.bridge);
  const std::string fw = forward_chain(rules_.bridge);
  if (mine.input_jump) {
    if (auto r = remove_jump(f, "INPUT", in); !r) return r;
    mine.input_jump = false;
  }
  if (mine.forward_jump) {
    if (auto r = remove_jump(f, "FORWARD", fw); !r) return r;
    mine.forward_jump = false;
  }
  if (mine.input_chain) {
    if (auto r = remove_chain(f, in); !r) return r;
    mine.input_chain = false;
  }
  if (mine.forward_chain) {
    if (auto r = remove_chain(f, fw); !r) return r;
    mine.forward_chain = false;
  }
  return {};
}

// created_now only ever turns true: a second install() must not forget what the first made.
result<void> host_firewall::ensure_chain(family f, const std::string& chain, const std::vector<rule>& rules,
                                         bool& created_now) {
  std::string new_output;
  auto make = command(f, {"-N", chain});
  auto made = status_of(make, &new_output);
  if (!made) return std::move(made).err();
  if (*made == 0) {
    created_now = true;
  } else {
    // -N fails when the chain exists (an earlier run): refill it. If -F fails too, the
    // chain was never there and -N's complaint is the one that explains why. While it is
    // refilled, a jump already in place falls through an emptied chain for a moment; only a
    // restart that finds old rules gets here, and the moment is a few iptables calls long.
    std::string flush_output;
    auto flush = command(f, {"-F", chain});
    auto flushed = status_of(flush, &flush_output);
    if (!flushed) return std::move(flushed).err();
    if (*flushed != 0) {
      error e = failed(make, *made, new_output);
      e.message += "; and `" + command_line(flush) + "` said: " + trimmed(flush_output);
      return e;
    }
  }
  for (const auto& spec : rules) {
    rule args = {"-A", chain};
    args.insert(args.end(), spec.begin(), spec.end());
    if (auto r = must(command(f, std::move(args))); !r) return r;
  }
  return {};
}

result<void> host_firewall::ensure_jump(family f, const std::string& hook, const std::string& chain,
                                        bool& inserted_now) {
  auto present = status_of(command(f, {"-C", hook, "-i", rules_.bridge, "-j", chain}), nullptr);
  if (!present) return std::move(present).err();
  if (*present == 0) return {};
  if (auto r = must(command(f, {"-I", hook, "1", "-i", rules_.bridge, "-j", chain})); !r) return r;
  inserted_now = true;
  return {};
}

result<void> host_firewall::remove_jump(family f, const std::string& hook, const std::string& chain) {
  std::string output;
  auto del = command(f, {"-D", hook, "-i", rules_.bridge, "-j", chain});
  auto deleted = status_of(del, &output);
  if (!deleted) return std::move(deleted).err();
  if (*deleted == 0) return {};
  // Already gone (someone flushed the table) is what remove() wants anyway.
  auto present = status_of(command(f, {"-C", hook, "-i", rules_.bridge, "-j", chain}), nullptr);
  if (present && *present != 0) return {};
  return failed(del, *deleted, output);
}

result<void> host_firewall::remove_chain(family f, const std::string& chain) {
  auto exists = status_of(command(f, {"-S", chain}), nullptr);
  if (!exists) return std::move(exists).err();
  if (*exists != 0) return {};  // already gone
  if (auto r = must(command(f, {"-F", chain})); !r) return r;
  return must(command(f, {"-X", chain}));
}

std::vector<rule> host_firewall::input_rules(family f) const {
  rule established = {"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"};
  if (f == family::ipv6) return {established, {"-j", "DROP"}};
  return {established,
          {"-p", "tcp", "-d", rules_.gateway, "--dport", std::to_string(rules_.proxy_port), "-j", "ACCEPT"},
          {"-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"},
          {"-j", "REJECT", "--reject-with", "icmp-port-unreachable"}};
}

std::vector<rule> host_firewall::forward_rules(family f) const {
  if (f == family::ipv6)
    return {{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"}, {"-j", "DROP"}};
  return {{"-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"},
          {"-j", "REJECT", "--reject-with", "icmp-port-unreachable"}};
}

std::vector<std::string> host_firewall::command(family f, std::vector<std::string> args) {
  std::vector<std::string> argv = {f == family::ipv4 ? "iptables" : "ip6tables", "-w"};
  argv.insert(argv.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  return argv;
}

result<int> host_firewall::status_of(const std::vector<std::string>& argv, std::string* output) {
  auto status = runner_.run(argv, output);
  if (!status) return make_error(status.err().code, "`" + command_line(argv) + "`: " + status.err().message);
  return status;
}

result<void> host_firewall::must(const std::vector<std::string>& argv) {
  std::string output;
  auto status = status_of(argv, &output);
  if (!status) return std::move(status).err();
  if (*status != 0) return failed(argv, *status, output);
  return {};
}

}  // namespace sandfort::firewall
