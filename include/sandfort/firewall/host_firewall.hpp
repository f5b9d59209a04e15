#pragma once
// Host firewall rules for the sandbox bridge. A Docker `internal` network has no route out,
// but its containers can still connect to every address of the host itself (the bridge's
// gateway, docker0, the host's own IPs). These rules make the host answer only the egress
// proxy port to traffic that arrives on the sandbox bridge, and forward nothing from it.
//
// Rules are keyed on the input interface, so the host can still connect INTO a container
// (preview): the container's replies are ESTABLISHED and accepted.
//
// host_firewall's commands run synchronously: iptables takes milliseconds, but `-w` waits for
// the xtables lock as long as another tool holds it. From the daemon's I/O thread, call them
// through firewall_worker, which runs them on a thread of its own.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::firewall {

// The seam between the rules and the programs that apply them (tests record argv instead).
class command_runner {
 public:
  virtual ~command_runner() = default;
  // Runs argv (no shell), returns the exit status; output (stdout+stderr) into *output when given.
  // An error only when the program could not be run at all (not found, no processes left).
  virtual result<int> run(const std::vector<std::string>& argv, std::string* output) = 0;
};

// posix_spawn with stdin from /dev/null, default signal dispositions and an empty mask.
// A program named without a '/' is looked for in search_dirs only, not in PATH: sandfortd's
// PATH often lacks the sbin directories, and a firewall tool is not something to take from
// wherever PATH happens to point. Killed by signal N: 128+N.
class process_runner final : public command_runner {
 public:
  static std::vector<std::string> default_search_dirs();  // /usr/sbin, /sbin, /usr/bin, /bin

  explicit process_runner(std::vector<std::string> search_dirs = default_search_dirs());
  result<int> run(const std::vector<std::string>& argv, std::string* output) override;

 private:
  std::vector<std::string> search_dirs_;
};

struct rule_set {
  std::string bridge;   // the sandbox bridge interface, "sandfort0": 1-15 chars of [A-Za-z0-9_.-]
  std::string gateway;  // the bridge's IPv4 address, where the proxy listens
  unsigned short proxy_port = 0;
};

// invalid_argument naming the field: a bad bridge name (empty, over 15 characters, a
// character outside [A-Za-z0-9_.-], a leading '-', "." or ".."), a gateway that is not a
// dotted-quad IPv4 address, or port 0.
result<void> validate(const rule_set& rules);

// The chains install() fills: SANDFORT-IN-<bridge> (jumped to from INPUT) and
// SANDFORT-FW-<bridge> (from FORWARD). At most 27 characters, within iptables' limit of 28.
std::string input_chain(std::string_view bridge);
std::string forward_chain(std::string_view bridge);

// IPv4 (iptables), required:
//   SANDFORT-IN-<bridge>: ESTABLISHED,RELATED accept; tcp to <gateway>:<proxy_port> accept;
//                         other tcp REJECT tcp-reset; everything else REJECT icmp-port-unreachable
//   SANDFORT-FW-<bridge>: tcp REJECT tcp-reset; everything else REJECT icmp-port-unreachable
//   -I INPUT 1 -i <bridge> -j SANDFORT-IN-<bridge>, -I FORWARD 1 -i <bridge> -j SANDFORT-FW-<bridge>
// IPv6 (ip6tables), best effort (containers get no IPv6 today; this is belt and braces):
// both chains ESTABLISHED,RELATED accept, then DROP; the same jumps. A host without
// ip6tables or IPv6 tables gets a warning in the log, not an error.
class host_firewall {
 public:
  host_firewall(command_runner& runner, rule_set rules);

  // Idempotent: a chain that exists is flushed and refilled, a jump that exists is not
  // added again. Validates the rule set before running anything. Fails (the error names the
  // command and its output) when the IPv4 rules cannot be installed; what was installed
  // until then stays recorded, so remove() still undoes it.
  result<void> install();
  // Removes only what this object's install() created: the jumps it inserted and the chains
  // it made. Rules found in place (left by an earlier run) stay. Something already removed
  // by someone else is not an error. IPv6 failures are logged, IPv4 ones returned.
  result<void> remove();
  // install() inserted jumps that were not there before (so remove() takes them out).
  bool created() const;

 private:
  enum class family { ipv4, ipv6 };
  // What this object added, per address family.
  struct added {
    bool input_chain = false;
    bool forward_chain = false;
    bool input_jump = false;
    bool forward_jump = false;
  };

  result<void> install_family(family f);
  result<void> remove_family(family f);
  result<void> ensure_chain(family f, const std::string& chain, const std::vector<std::vector<std::string>>& rules,
                            bool& created_now);
  result<void> ensure_jump(family f, const std::string& hook, const std::string& chain, bool& inserted_now);
  result<void> remove_jump(family f, const std::string& hook, const std::string& chain);
  result<void> remove_chain(family f, const std::string& chain);
  std::vector<std::vector<std::string>> input_rules(family f) const;
  std::vector<std::vector<std::string>> forward_rules(family f) const;
  // `iptables -w args...` or `ip6tables -w args...`.
  static std::vector<std::string> command(family f, std::vector<std::string> args);
  // The exit status, or an error naming the command when it could not be run at all.
  result<int> status_of(const std::vector<std::string>& argv, std::string* output);
  // The same, but anything other than exit 0 is an error naming the command and its output.
  result<void> must(const std::vector<std::string>& argv);
  added& added_for(family f) { return f == family::ipv4 ? v4_ : v6_; }

  command_runner& runner_;
  rule_set rules_;
  added v4_;
  added v6_;
};

// Runs a host_firewall's install() and remove() on one thread of its own, so that the I/O
// thread serves requests while a process is spawned and waited for. One thread: calls never
// overlap, and the host_firewall is only ever touched by one thread at a time, provided the
// caller leaves it alone until the call completes.
class firewall_worker {
 public:
  firewall_worker();
  ~firewall_worker();  // waits for a call in progress to end
  firewall_worker(const firewall_worker&) = delete;
  firewall_worker& operator=(const firewall_worker&) = delete;

  // Resume on the awaiting coroutine's executor with the call's result.
  boost::asio::awaitable<result<void>> install(host_firewall& fw);
  boost::asio::awaitable<result<void>> remove(host_firewall& fw);

 private:
  boost::asio::thread_pool pool_;
};

}  // namespace sandfort::firewall
