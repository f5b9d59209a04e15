// Connections kept for the agent between buffered calls, over real socket pairs: reuse, the
// liveness check, the bounds, the idle timeout, a changed container and forget().
#include "agent_idle.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>

namespace {

using namespace sandfort::sandbox;
namespace asio = boost::asio;
using idle_clock = idle_connections::clock;
using std::chrono::milliseconds;

// One connection: the daemon's end as an agent_stream, the agent's end as a plain socket.
struct idle_pair {
  agent_stream ours;
  asio::local::stream_protocol::socket theirs;
};

idle_pair make_idle_pair(asio::io_context& io) {
  asio::local::stream_protocol::socket a(io), b(io);
  asio::local::connect_pair(a, b);
  return {agent_stream(std::move(a)), std::move(b)};
}

// Whether the daemon closed its end: the agent's end reads EOF at once (or a reset, when the
// daemon's end held bytes it never read).
bool idle_closed_by_us(asio::local::stream_protocol::socket& theirs) {
  char c;
  const ssize_t n = ::recv(theirs.native_handle(), &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

int idle_fd_of(agent_stream& s) { return s.socket().native_handle(); }

}  // namespace

TEST_CASE("idle agent connections are reused until they are not fit", "[sandbox][agent_idle]") {
  asio::io_context io;
  idle_connections idle({4, 16, milliseconds(10'000)});
  const auto t0 = idle_clock::time_point{} + std::chrono::hours(1);

  SECTION("a parked connection comes back for the same sandbox and container, once") {
    auto p = make_idle_pair(io);
    const int fd = idle_fd_of(p.ours);
    idle.park("sbx-a", "c1", std::move(p.ours), t0);
    CHECK(idle.size() == 1);
    CHECK_FALSE(idle.take("sbx-b", "c1", t0));
    auto got = idle.take("sbx-a", "c1", t0 + milliseconds(5));
    REQUIRE(got);
    CHECK(idle_fd_of(*got) == fd);
    CHECK(idle.size() == 0);
    CHECK_FALSE(idle.take("sbx-a", "c1", t0));
    CHECK_FALSE(idle_closed_by_us(p.theirs));
  }

  SECTION("one the agent closed is discarded, and the next one is tried") {
    auto alive = make_idle_pair(io);
    auto dead = make_idle_pair(io);
    const int alive_fd = idle_fd_of(alive.ours);
    idle.park("sbx-a", "c1", std::move(alive.ours), t0);
    idle.park("sbx-a", "c1", std::move(dead.ours), t0);
    dead.theirs.close();
    auto got = idle.take("sbx-a", "c1", t0);
    REQUIRE(got);
    CHECK(idle_fd_of(*got) == alive_fd);
    CHECK(idle.size() == 0);
  }

  SECTION("one with bytes nobody asked for is discarded") {
    auto p = make_idle_pair(io);
    idle.park("sbx-a", "c1", std::move(p.ours), t0);
    REQUIRE(::send(p.theirs.native_handle(), "HTTP/1.1 200 OK\r\n", 17, 0) == 17);
    CHECK_FALSE(idle.take("sbx-a", "c1", t0));
    CHECK(idle.size() == 0);
    CHECK(idle_closed_by_us(p.theirs));
  }

  SECTION("one idle for the timeout is closed") {
    auto p = make_idle_pair(io);
    idle.park("sbx-a", "c1", std::move(p.ours), t0);
    CHECK_FALSE(idle.take("sbx-a", "c1", t0 + milliseconds(10'000)));
    CHECK(idle_closed_by_us(p.theirs));
  }

  SECTION("a sandbox nobody calls loses its connections at the next call to any sandbox after the timeout") {
    auto p = make_idle_pair(io);
    idle.park("sbx-a", "c1", std::move(p.ours), t0);
    CHECK_FALSE(idle.take("sbx-b", "c9", t0 + milliseconds(11'000)));
    CHECK(idle.size() == 0);
    CHECK(idle_closed_by_us(p.theirs));
  }

  SECTION("a sandbox in a new container does not get its old container's connections") {
    auto p = make_idle_pair(io);
    idle.park("sbx-a", "c1", std::move(p.ours), t0);
    CHECK_FALSE(idle.take("sbx-a", "c2", t0));
    CHECK(idle.size() == 0);
    CHECK(idle_closed_by_us(p.theirs));
  }

  SECTION("at most per_sandbox are kept for one sandbox: the oldest is closed") {
    std::vector<idle_pair> pairs;
    for (int i = 0; i < 5; ++i) pairs.push_back(make_idle_pair(io));
    for (auto& p : pairs) idle.park("sbx-a", "c1", std::move(p.ours), t0);
    CHECK(idle.size() == 4);
    CHECK(idle_closed_by_us(pairs[0].theirs));
    for (int i = 1; i < 5; ++i) CHECK_FALSE(idle_closed_by_us(pairs[static_cast<std::size_t>(i)].theirs));
  }

  SECTION("forget closes every connection of that sandbox and no other") {
    auto a1 = make_idle_pair(io), a2 = make_idle_pair(io), b = make_idle_pair(io);
    idle.park("sbx-a", "c1", std::move(a1.ours), t0);
    idle.park("sbx-a", "c1", std::move(a2.ours), t0);
    idle.park("sbx-b", "c2", std::move(b.ours), t0);
    idle.forget("sbx-a");
    CHECK(idle.size() == 1);
    CHECK(idle_closed_by_us(a1.theirs));
    CHECK(idle_closed_by_us(a2.theirs));
    CHECK_FALSE(idle_closed_by_us(b.theirs));
    CHECK_FALSE(idle.take("sbx-a", "c1", t0));
    CHECK(idle.take("sbx-b", "c2", t0));
  }
}

TEST_CASE("idle agent connections stay under their total", "[sandbox][agent_idle]") {
  asio::io_context io;
  idle_connections idle({4, 2, milliseconds(10'000)});
  const auto t0 = idle_clock::time_point{} + std::chrono::hours(1);
  auto a = make_idle_pair(io), b = make_idle_pair(io), c = make_idle_pair(io);
  idle.park("sbx-a", "c1", std::move(a.ours), t0);
  idle.park("sbx-b", "c2", std::move(b.ours), t0);
  idle.park("sbx-c", "c3", std::move(c.ours), t0);
  CHECK(idle.size() == 2);
  CHECK(idle_closed_by_us(c.theirs));
  CHECK_FALSE(idle_closed_by_us(a.theirs));
}
