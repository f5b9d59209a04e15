#include "sandfort/http/admission.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace sandfort::http;

namespace {

// A book whose connections are numbered; closing one records its number.
struct recorded_book {
  std::vector<int> closed_ones;
  std::vector<std::pair<std::string, connection_book::reason>> seen;
  connection_book book;

  explicit recorded_book(listener_limits limits)
      : book(limits, [this](const std::string& source, connection_book::reason why) { seen.emplace_back(source, why); }) {}

  connection_book::ticket open(int n, const std::string& source, std::function<bool()> has_input = {}) {
    return book.opened(source, [this, n] { closed_ones.push_back(n); }, std::move(has_input));
  }
};

}  // namespace

TEST_CASE("admission: source_key groups IPv6 by /64 and maps IPv4-mapped addresses to IPv4", "[http][admission]") {
  CHECK(source_key("203.0.113.9") == "203.0.113.9");
  CHECK(source_key("::ffff:203.0.113.9") == "203.0.113.9");
  CHECK(source_key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64");
  CHECK(source_key("2001:db8:1:2:bbbb::7") == source_key("2001:db8:1:2:aaaa::1"));
  CHECK(source_key("2001:db8:1:3::1") != source_key("2001:db8:1:2::1"));
  CHECK(source_key("unix") == "unix");
}

TEST_CASE("admission: source_counts checks the total before the source, and releases", "[http][admission]") {
  source_counts counts(2, 3);
  CHECK(counts.take("a") == over_cap::none);
  CHECK(counts.take("a") == over_cap::none);
  CHECK(counts.take("a") == over_cap::source);
  CHECK(counts.take("b") == over_cap::none);
  CHECK(counts.take("c") == over_cap::total);
  CHECK(counts.total() == 3);
  counts.release("a");
  CHECK(counts.of("a") == 1);
  CHECK(counts.take("c") == over_cap::none);
}

TEST_CASE("admission: refusal_log gives one line per source per period, summing the rest", "[http][admission]") {
  refusal_log log(std::chrono::seconds(5));
  auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  CHECK(log.note("a", t0) == 1u);
  CHECK_FALSE(log.note("a", t0 + std::chrono::seconds(1)));
  CHECK_FALSE(log.note("a", t0 + std::chrono::seconds(2)));
  CHECK(log.note("b", t0 + std::chrono::seconds(2)) == 1u);
  CHECK(log.note("a", t0 + std::chrono::seconds(6)) == 3u);
}

TEST_CASE("admission: one source beyond its idle cap closes its own oldest idle connection", "[http][admission]") {
  recorded_book r({.max_connections = 100, .idle_per_source = 3, .idle = 50});
  r.open(1, "attacker");
  r.open(2, "victim");
  r.open(3, "attacker");
  r.open(4, "attacker");
  CHECK(r.closed_ones.empty());
  r.open(5, "attacker");
  CHECK(r.closed_ones == std::vector<int>{1});  // the attacker's oldest, not the victim's older one
  CHECK(r.book.idle_of("attacker") == 3);
  CHECK(r.book.idle_of("victim") == 1);
  CHECK(r.book.open() == 4);
  CHECK(r.book.evicted(connection_book::reason::source_cap) == 1);
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].first == "attacker");
}

TEST_CASE("admission: beyond the total idle cap the oldest idle connection of anyone is closed", "[http][admission]") {
  recorded_book r({.max_connections = 100, .idle_per_source = 10, .idle = 3});
  auto busy = r.open(1, "a");
  r.book.busy(busy);  // a request being answered: never a victim
  r.open(2, "b");
  r.open(3, "c");
  r.open(4, "d");
  r.open(5, "e");
  CHECK(r.closed_ones == std::vector<int>{2});
  CHECK(r.book.idle_count() == 3);
  CHECK(r.book.open() == 4);
}

TEST_CASE("admission: at max_connections the oldest idle makes room, when all are busy there is none",
          "[http][admission]") {
  recorded_book r({.max_connections = 3, .idle_per_source = 10, .idle = 10});
  auto one = r.open(1, "a");
  auto two = r.open(2, "b");
  auto three = r.open(3, "c");
  r.book.busy(one);
  r.book.busy(three);
  CHECK(r.book.make_room());  // closes 2, the only idle one
  CHECK(r.closed_ones == std::vector<int>{2});
  CHECK(r.book.open() == 2);
  r.book.closed(two);  // its owner notices later: counted once
  CHECK(r.book.open() == 2);
  auto four = r.open(4, "d");
  r.book.busy(four);
  CHECK_FALSE(r.book.make_room());  // every slot does work: nothing is closed
  CHECK(r.closed_ones.size() == 1);
  r.book.closed(one);
  CHECK(r.book.make_room());
}

TEST_CASE("admission: a kept-alive connection idles again, counted, and counts as the newest", "[http][admission]") {
  recorded_book r({.max_connections = 100, .idle_per_source = 2, .idle = 10});
  auto first = r.open(1, "a");
  r.open(2, "a");
  r.book.busy(first);
  CHECK(r.book.idle_of("a") == 1);
  r.book.idle(first);  // answered, waiting for the next request: the source's cap applies again
  CHECK(r.closed_ones.empty());
  CHECK(r.book.idle_of("a") == 2);
  r.open(3, "a");
  CHECK(r.closed_ones == std::vector<int>{2});  // 2 has idled longest
}

TEST_CASE("admission: a trusted proxy's connections are not capped per source, only in total", "[http][admission]") {
  recorded_book r({.max_connections = 100, .idle_per_source = 2, .idle = 5});
  for (int i = 1; i <= 5; ++i) r.open(i, "");
  CHECK(r.closed_ones.empty());
  r.open(6, "");
  CHECK(r.closed_ones == std::vector<int>{1});
  CHECK(r.book.evicted(connection_book::reason::idle_cap) == 1);
  CHECK(r.book.evicted(connection_book::reason::source_cap) == 0);
}

TEST_CASE("admission: 1,100 idle connections from one source hold its cap, others keep theirs", "[http][admission]") {
  recorded_book r({.max_connections = 1024, .idle_per_source = 64, .idle = 512});
  auto victim = r.open(-1, "victim");
  for (int i = 0; i < 1100; ++i) r.open(i, "attacker");
  CHECK(r.book.idle_of("attacker") == 64);
  CHECK(r.book.open() == 65);
  CHECK(r.closed_ones.size() == 1100 - 64);
  CHECK(r.book.idle_of("victim") == 1);
  r.book.busy(victim);
  CHECK(r.book.make_room());
  r.book.closed(victim);
}

TEST_CASE("admission: a burst of connections with their requests waiting closes none of them", "[http][admission]") {
  recorded_book r({.max_connections = 4, .idle_per_source = 2, .idle = 3});
  bool waiting = true;  // each has its header in the socket, not yet read
  auto has_input = [&waiting] { return waiting; };
  auto a = r.open(1, "client", has_input);
  r.open(2, "client", has_input);
  r.open(3, "client", has_input);
  r.open(4, "client", has_input);
  CHECK(r.closed_ones.empty());  // over both idle caps for the moment, and that is all
  CHECK(r.book.idle_of("client") == 4);
  CHECK_FALSE(r.book.make_room());  // nothing can go: the acceptor waits
  // Read, answered, idle again with nothing waiting: now they are candidates like any other.
  waiting = false;
  r.book.busy(a);
  r.book.idle(a);
  CHECK(r.closed_ones == std::vector<int>{2, 3});  // back under the source's cap, oldest first
  CHECK(r.book.idle_of("client") == 2);
  CHECK(r.book.make_room());
}
