// The rules host_firewall installs, against a fake iptables that keeps the table in memory.

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "fake_iptables.hpp"

using namespace sandfort;
using namespace sandfort::firewall;
using namespace sandfort::firewall::test;

namespace {

rule_set sandbox_bridge() { return {"sandfort0", "10.88.0.1", 3128}; }

const std::vector<std::string> v4_input = {
    "-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
    "-p tcp -d 10.88.0.1 --dport 3128 -j ACCEPT",
    "-p tcp -j REJECT --reject-with tcp-reset",
    "-j REJECT --reject-with icmp-port-unreachable",
};
const std::vector<std::string> v4_forward = {
    "-p tcp -j REJECT --reject-with tcp-reset",
    "-j REJECT --reject-with icmp-port-unreachable",
};
const std::vector<std::string> v6_both = {
    "-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
    "-j DROP",
};

void check_installed(fake_iptables& fake) {
  auto& v4 = fake.tables["iptables"];
  CHECK(v4["SANDFORT-IN-sandfort0"] == v4_input);
  CHECK(v4["SANDFORT-FW-sandfort0"] == v4_forward);
  CHECK(v4["INPUT"] == std::vector<std::string>{"-i sandfort0 -j SANDFORT-IN-sandfort0", "-i lo -j ACCEPT"});
  CHECK(v4["FORWARD"] == std::vector<std::string>{"-i sandfort0 -j SANDFORT-FW-sandfort0", "-j DOCKER-USER"});
  auto& v6 = fake.tables["ip6tables"];
  CHECK(v6["SANDFORT-IN-sandfort0"] == v6_both);
  CHECK(v6["SANDFORT-FW-sandfort0"] == v6_both);
  CHECK(v6["INPUT"] == std::vector<std::string>{"-i sandfort0 -j SANDFORT-IN-sandfort0", "-i lo -j ACCEPT"});
  CHECK(v6["FORWARD"] == std::vector<std::string>{"-i sandfort0 -j SANDFORT-FW-sandfort0", "-j DOCKER-USER"});
}

bool any_call(const fake_iptables& fake, const std::string& op) {
  for (const auto& c : fake.calls)
    if (c.size() > 2 && c[2] == op) return true;
  return false;
}

}  // namespace

TEST_CASE("a first install on a clean host makes the chains, fills them, then jumps to them") {
  fake_iptables fake;
  const auto clean = fake.tables;
  host_firewall fw(fake, sandbox_bridge());
  CHECK_FALSE(fw.created());
  REQUIRE(fw.install());
  CHECK(fw.created());
  check_installed(fake);

  // Every command waits for the xtables lock, and never goes through a shell.
  for (const auto& c : fake.calls) {
    REQUIRE(c.size() > 2);
    CHECK((c[0] == "iptables" || c[0] == "ip6tables"));
    CHECK(c[1] == "-w");
  }
  // IPv4 first, and the jump only once its chain is complete.
  CHECK(fake.calls_of("iptables") == std::vector<std::string>{
                                         "-N SANDFORT-IN-sandfort0",
                                         "-A SANDFORT-IN-sandfort0 " + v4_input[0],
                                         "-A SANDFORT-IN-sandfort0 " + v4_input[1],
                                         "-A SANDFORT-IN-sandfort0 " + v4_input[2],
                                         "-A SANDFORT-IN-sandfort0 " + v4_input[3],
                                         "-N SANDFORT-FW-sandfort0",
                                         "-A SANDFORT-FW-sandfort0 " + v4_forward[0],
                                         "-A SANDFORT-FW-sandfort0 " + v4_forward[1],
                                         "-C INPUT -i sandfort0 -j SANDFORT-IN-sandfort0",
                                         "-I INPUT 1 -i sandfort0 -j SANDFORT-IN-sandfort0",
                                         "-C FORWARD -i sandfort0 -j SANDFORT-FW-sandfort0",
                                         "-I FORWARD 1 -i sandfort0 -j SANDFORT-FW-sandfort0",
                                     });
  CHECK(fake.calls.front()[0] == "iptables");

  REQUIRE(fw.remove());
  CHECK(fake.tables == clean);
  CHECK_FALSE(fw.created());
}

TEST_CASE("install is idempotent, and an object that found the rules there leaves them") {
  fake_iptables fake;
  const auto clean = fake.tables;
  host_firewall first(fake, sandbox_bridge());
  REQUIRE(first.install());

  SECTION("the same object again: chains refilled, no jump twice, still its own") {
    fake.calls.clear();
    REQUIRE(first.install());
    check_installed(fake);
    CHECK(first.created());
    CHECK(any_call(fake, "-F"));
    CHECK_FALSE(any_call(fake, "-I"));
    REQUIRE(first.remove());
    CHECK(fake.tables == clean);
  }

  SECTION("a second object (a restarted daemon) finds them and does not take them away") {
    host_firewall second(fake, sandbox_bridge());
    REQUIRE(second.install());
    check_installed(fake);
    CHECK_FALSE(second.created());
    fake.calls.clear();
    REQUIRE(second.remove());
    CHECK_FALSE(any_call(fake, "-D"));
    CHECK_FALSE(any_call(fake, "-X"));
    check_installed(fake);
    REQUIRE(first.remove());
    CHECK(fake.tables == clean);
  }

  SECTION("a chain refilled after someone changed it holds exactly our rules again") {
    fake.tables["iptables"]["SANDFORT-IN-sandfort0"] = {"-j ACCEPT"};
    host_firewall second(fake, sandbox_bridge());
    REQUIRE(second.install());
    check_installed(fake);
    REQUIRE(first.remove());
  }
}

TEST_CASE("remove takes out only what this object's install created") {
  fake_iptables fake;
  // An earlier run left the IPv4 input chain (but no jump) behind.
  fake.tables["iptables"]["SANDFORT-IN-sandfort0"] = {"-j ACCEPT"};
  host_firewall fw(fake, sandbox_bridge());
  REQUIRE(fw.install());
  CHECK(fw.created());
  check_installed(fake);
  REQUIRE(fw.remove());

  auto& v4 = fake.tables["iptables"];
  CHECK(v4.count("SANDFORT-IN-sandfort0") == 1);  // found, so kept (unreferenced, harmless)
  CHECK(v4.count("SANDFORT-FW-sandfort0") == 0);
  CHECK(v4["INPUT"] == std::vector<std::string>{"-i lo -j ACCEPT"});
  CHECK(v4["FORWARD"] == std::vector<std::string>{"-j DOCKER-USER"});
  CHECK(fake.tables["ip6tables"].count("SANDFORT-IN-sandfort0") == 0);

  SECTION("a second remove has nothing left to do") {
    fake.calls.clear();
    REQUIRE(fw.remove());
    CHECK(fake.calls.empty());
  }
}

TEST_CASE("remove does not mind rules that someone else already deleted") {
  fake_iptables fake;
  const auto clean = fake.tables;
  host_firewall fw(fake, sandbox_bridge());
  REQUIRE(fw.install());
  fake.tables = clean;  // e.g. `iptables -F; iptables -X` by an administrator
  REQUIRE(fw.remove());
  CHECK(fake.tables == clean);
}

TEST_CASE("ip6tables failures are logged, not fatal") {
  fake_iptables fake;
  const auto clean = fake.tables;

  SECTION("no ip6tables at all") {
    fake.missing.insert("ip6tables");
    host_firewall fw(fake, sandbox_bridge());
    REQUIRE(fw.install());
    CHECK(fake.tables["iptables"]["SANDFORT-IN-sandfort0"] == v4_input);
    CHECK(fw.created());
    REQUIRE(fw.remove());
    CHECK(fake.tables == clean);
  }

  SECTION("a kernel without IPv6 tables refuses everything") {
    fake.fail_when = [](const argv_t& argv) { return argv[0] == "ip6tables"; };
    host_firewall fw(fake, sandbox_bridge());
    REQUIRE(fw.install());
    CHECK(fake.tables["iptables"]["INPUT"].front() == "-i sandfort0 -j SANDFORT-IN-sandfort0");
    REQUIRE(fw.remove());
    CHECK(fake.tables == clean);
  }

  SECTION("half-way: the chain was made, a rule refused; remove still cleans it up") {
    fake.fail_when = [](const argv_t& argv) { return argv[0] == "ip6tables" && argv[2] == "-A"; };
    host_firewall fw(fake, sandbox_bridge());
    REQUIRE(fw.install());
    CHECK(fake.tables["ip6tables"].count("SANDFORT-IN-sandfort0") == 1);
    CHECK(fake.tables["ip6tables"]["INPUT"] == std::vector<std::string>{"-i lo -j ACCEPT"});
    REQUIRE(fw.remove());
    CHECK(fake.tables == clean);
  }
}

TEST_CASE("iptables failures are errors that name the command and its output") {
  fake_iptables fake;

  SECTION("a refused jump") {
    fake.fail_when = [](const argv_t& argv) { return argv[0] == "iptables" && argv[2] == "-I"; };
    host_firewall fw(fake, sandbox_bridge());
    auto r = fw.install();
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::internal);
    CHECK(r.err().message ==
          "`iptables -w -I INPUT 1 -i sandfort0 -j SANDFORT-IN-sandfort0` failed (exit 4): simulated failure");
    CHECK_FALSE(fw.created());
    // Nothing of IPv6 was tried once IPv4 failed.
    CHECK(fake.calls_of("ip6tables").empty());
    // The chains it made are still recorded, so remove() takes them away.
    REQUIRE(fw.remove());
    CHECK(fake.tables["iptables"].count("SANDFORT-IN-sandfort0") == 0);
    CHECK(fake.tables["iptables"].count("SANDFORT-FW-sandfort0") == 0);
  }

  SECTION("a chain that can neither be made nor flushed: both complaints") {
    fake.fail_when = [](const argv_t& argv) { return argv[2] == "-N"; };
    host_firewall fw(fake, sandbox_bridge());
    auto r = fw.install();
    REQUIRE_FALSE(r);
    CHECK(r.err().message ==
          "`iptables -w -N SANDFORT-IN-sandfort0` failed (exit 4): simulated failure; and "
          "`iptables -w -F SANDFORT-IN-sandfort0` said: iptables: No chain/target/match by that name.");
  }

  SECTION("no iptables at all") {
    fake.missing.insert("iptables");
    host_firewall fw(fake, sandbox_bridge());
    auto r = fw.install();
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::unavailable);
    CHECK(r.err().message == "`iptables -w -N SANDFORT-IN-sandfort0`: iptables not found");
  }

  SECTION("a jump that cannot be deleted") {
    host_firewall fw(fake, sandbox_bridge());
    REQUIRE(fw.install());
    fake.fail_when = [](const argv_t& argv) { return argv[0] == "iptables" && argv[2] == "-D"; };
    auto r = fw.remove();
    REQUIRE_FALSE(r);
    CHECK(r.err().message ==
          "`iptables -w -D INPUT -i sandfort0 -j SANDFORT-IN-sandfort0` failed (exit 4): simulated failure");
    fake.fail_when = nullptr;
    REQUIRE(fw.remove());  // what is still recorded can be retried
    CHECK(fake.tables["iptables"].count("SANDFORT-IN-sandfort0") == 0);
  }
}

TEST_CASE("bad bridge names, gateways and ports are refused before any command runs") {
  auto refused = [](rule_set rules) {
    fake_iptables fake;
    host_firewall fw(fake, std::move(rules));
    auto r = fw.install();
    CHECK(fake.calls.empty());
    CHECK_FALSE(fw.created());
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::invalid_argument);
    return r.err().message;
  };
  for (std::string bad : {"", "sixteen-chars-xx", "br 0", "br;rm", "br/0", "sandfort+", "-j", ".", "..", "br\n0"}) {
    INFO("bridge '" << bad << "'");
    CHECK_THAT(refused({bad, "10.88.0.1", 3128}), Catch::Contains("bridge"));
  }
  for (std::string bad : {"", "10.88.0", "10.88.0.256", "::1", "10.88.0.1 ", "010.88.0.1", "sandfort.local",
                          "10.88.0.1/24"}) {
    INFO("gateway '" << bad << "'");
    CHECK_THAT(refused({"sandfort0", bad, 3128}), Catch::Contains("gateway"));
  }
  CHECK_THAT(refused({"sandfort0", "10.88.0.1", 0}), Catch::Contains("proxy_port"));

  CHECK(validate({"abcdefghijklmno", "10.88.0.1", 3128}));  // 15 characters: the most there is
  CHECK(validate({"br-sf.0_X", "255.255.255.255", 65535}));
}

TEST_CASE("chain names stay within iptables' 28 characters") {
  CHECK(input_chain("sandfort0") == "SANDFORT-IN-sandfort0");
  CHECK(forward_chain("sandfort0") == "SANDFORT-FW-sandfort0");
  CHECK(input_chain("abcdefghijklmno").size() <= 28);
  CHECK(forward_chain("abcdefghijklmno").size() <= 28);
}

// --- off the I/O thread -------------------------------------------------------------------------

namespace {

// The fake iptables, but each call takes a while (as `-w` waiting for the xtables lock would)
// and the threads it ran on are kept.
class slow_runner final : public command_runner {
 public:
  explicit slow_runner(fake_iptables& fake) : fake_(fake) {}
  result<int> run(const std::vector<std::string>& argv, std::string* output) override {
    {
      std::lock_guard lock(mutex_);
      threads_.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return fake_.run(argv, output);
  }
  std::set<std::thread::id> threads() {
    std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  fake_iptables& fake_;
  std::mutex mutex_;
  std::set<std::thread::id> threads_;
};

}  // namespace

TEST_CASE("firewall: firewall_worker runs the commands on its own thread while the I/O thread serves",
          "[firewall]") {
  namespace asio = boost::asio;
  fake_iptables fake;
  slow_runner slow(fake);
  host_firewall fw(slow, sandbox_bridge());
  firewall_worker worker;
  asio::io_context ioc;
  bool done = false;
  int ticks = 0;
  result<void> installed = make_error(errc::internal, "not run");
  result<void> removed = make_error(errc::internal, "not run");
  std::set<std::thread::id> resumed_on;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        installed = co_await worker.install(fw);
        resumed_on.insert(std::this_thread::get_id());
        removed = co_await worker.remove(fw);
        resumed_on.insert(std::this_thread::get_id());
        done = true;
      },
      asio::detached);
  // Stands for the requests the I/O thread keeps serving meanwhile.
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor);
        while (!done) {
          timer.expires_after(std::chrono::milliseconds(2));
          co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          ++ticks;
        }
      },
      asio::detached);
  ioc.run_for(std::chrono::seconds(20));
  REQUIRE(done);
  CHECK(installed);
  CHECK(removed);
  CHECK(fake.tables["iptables"]["INPUT"] == std::vector<std::string>{"-i lo -j ACCEPT"});
  CHECK(resumed_on == std::set<std::thread::id>{std::this_thread::get_id()});
  auto ran_on = slow.threads();
  CHECK(ran_on.size() == 1);
  CHECK_FALSE(ran_on.contains(std::this_thread::get_id()));
  // About 30 commands of 10 ms each: the I/O thread ticked all along.
  INFO("ticks: " << ticks << ", iptables calls: " << fake.calls.size());
  CHECK(fake.calls.size() >= 20);
  CHECK(ticks >= 20);
}
