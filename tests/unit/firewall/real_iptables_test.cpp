// host_firewall against the real iptables of this machine. The bridge is a made-up name with
// no interface behind it, so the rules match nothing while the test runs. Needs root: CI is
// root; unprivileged developers get a warning instead.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <utility>

#include "sandfort/firewall/host_firewall.hpp"
#include "support/prerequisite.hpp"

using namespace sandfort;
using namespace sandfort::firewall;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `<tool> -w -S`, or nothing when the tool cannot list (no IPv6 tables).
std::optional<std::vector<std::string>> listing(command_runner& runner, const std::string& tool) {
  std::string output;
  auto status = runner.run({tool, "-w", "-S"}, &output);
  if (!status || *status != 0) return std::nullopt;
  return lines_of(output);
}

std::size_t count(const std::vector<std::string>& lines, const std::string& line) {
  return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), line));
}

std::size_t mentions(const std::vector<std::string>& lines, const std::string& word) {
  return static_cast<std::size_t>(
      std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(word) != std::string::npos; }));
}

// Takes away whatever a crashed earlier run with the same name may have left.
void purge(command_runner& runner, const std::string& bridge) {
  for (std::string tool : {"iptables", "ip6tables"}) {
    for (auto [hook, chain] : {std::pair{"INPUT", input_chain(bridge)}, std::pair{"FORWARD", forward_chain(bridge)}}) {
      while (true) {
        auto r = runner.run({tool, "-w", "-D", hook, "-i", bridge, "-j", chain}, nullptr);
        if (!r || *r != 0) break;
      }
      (void)runner.run({tool, "-w", "-F", chain}, nullptr);
      (void)runner.run({tool, "-w", "-X", chain}, nullptr);
    }
  }
}

struct purge_at_exit {
  ~purge_at_exit() { purge(runner, bridge); }
  command_runner& runner;
  std::string bridge;
};

void check_v4_installed(const std::vector<std::string>& s, const std::string& bridge) {
  const std::string in = input_chain(bridge);
  const std::string fw = forward_chain(bridge);
  CHECK(count(s, "-N " + in) == 1);
  CHECK(count(s, "-N " + fw) == 1);
  CHECK(count(s, "-A INPUT -i " + bridge + " -j " + in) == 1);
  CHECK(count(s, "-A FORWARD -i " + bridge + " -j " + fw) == 1);
  // Our jumps come before anything else of INPUT and FORWARD.
  auto first_of = [&](const std::string& hook) {
    for (const auto& l : s)
      if (l.starts_with("-A " + hook + " ")) return l;
    return std::string();
  };
  CHECK(first_of("INPUT") == "-A INPUT -i " + bridge + " -j " + in);
  CHECK(first_of("FORWARD") == "-A FORWARD -i " + bridge + " -j " + fw);
  std::vector<std::string> in_rules;
  std::vector<std::string> fw_rules;
  for (const auto& l : s) {
    if (l.starts_with("-A " + in + " ")) in_rules.push_back(l);
    if (l.starts_with("-A " + fw + " ")) fw_rules.push_back(l);
  }
  CHECK(in_rules == std::vector<std::string>{
                        "-A " + in + " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
                        "-A " + in + " -d 10.254.254.1/32 -p tcp -m tcp --dport 3128 -j ACCEPT",
                        "-A " + in + " -p tcp -j REJECT --reject-with tcp-reset",
                        "-A " + in + " -j REJECT --reject-with icmp-port-unreachable",
                    });
  CHECK(fw_rules == std::vector<std::string>{
                        "-A " + fw + " -p tcp -j REJECT --reject-with tcp-reset",
                        "-A " + fw + " -j REJECT --reject-with icmp-port-unreachable",
                    });
}

}  // namespace

TEST_CASE("install, install again and remove on the real iptables") {
  if (::geteuid() != 0) return testing::missing_prerequisite("not root: the real iptables cannot be changed");
  process_runner runner;
  const std::string bridge = "sftest" + std::to_string(::getpid() % 10000);
  purge(runner, bridge);
  purge_at_exit cleanup{runner, bridge};
  auto before = listing(runner, "iptables");
  REQUIRE(before);  // as root, iptables must be there: this test is how CI checks it
  CHECK(mentions(*before, bridge) == 0);
  auto before6 = listing(runner, "ip6tables");

  host_firewall fw(runner, {bridge, "10.254.254.1", 3128});
  auto installed = fw.install();
  INFO((installed ? std::string("installed") : installed.err().message));
  REQUIRE(installed);
  CHECK(fw.created());
  auto after = listing(runner, "iptables");
  REQUIRE(after);
  check_v4_installed(*after, bridge);
  if (before6) {
    auto after6 = listing(runner, "ip6tables");
    REQUIRE(after6);
    CHECK(count(*after6, "-A INPUT -i " + bridge + " -j " + input_chain(bridge)) == 1);
    CHECK(count(*after6, "-A " + input_chain(bridge) + " -j DROP") == 1);
    CHECK(count(*after6, "-A " + forward_chain(bridge) + " -j DROP") == 1);
  } else {
    testing::missing_prerequisite("ip6tables cannot list here: the IPv6 half");
  }

  // Again, by the same object and by a new one: still one jump each, and the new one knows
  // it did not create them.
  REQUIRE(fw.install());
  host_firewall restarted(runner, {bridge, "10.254.254.1", 3128});
  REQUIRE(restarted.install());
  CHECK_FALSE(restarted.created());
  REQUIRE(restarted.remove());
  auto again = listing(runner, "iptables");
  REQUIRE(again);
  check_v4_installed(*again, bridge);

  REQUIRE(fw.remove());
  auto removed = listing(runner, "iptables");
  REQUIRE(removed);
  CHECK(mentions(*removed, bridge) == 0);
  if (before6) {
    auto removed6 = listing(runner, "ip6tables");
    REQUIRE(removed6);
    CHECK(mentions(*removed6, bridge) == 0);
  }
}
