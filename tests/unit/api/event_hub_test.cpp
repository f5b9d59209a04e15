// The event stream's hub: the bounds on streams, the highest seq it was told, and the wake-up of
// an organization's streams (and only theirs) when its chain grows.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sandfort/api/event_hub.hpp"

using namespace sandfort;

TEST_CASE("event hub: streams per organization and per client address are bounded, leaving makes room") {
  boost::asio::io_context io;
  api::event_hub hub({/*per_org=*/3, /*per_source=*/2});
  std::vector<std::unique_ptr<boost::asio::steady_timer>> bells;
  for (int i = 0; i < 8; ++i) bells.push_back(std::make_unique<boost::asio::steady_timer>(io));
  auto a1 = hub.subscribe("org-a", "10.0.0.1", *bells[0]);
  auto a2 = hub.subscribe("org-a", "10.0.0.1", *bells[1]);
  REQUIRE(a1);
  REQUIRE(a2);
  auto third_from_one_address = hub.subscribe("org-a", "10.0.0.1", *bells[2]);
  REQUIRE_FALSE(third_from_one_address);
  CHECK(third_from_one_address.err().code == errc::quota_exceeded);
  auto a3 = hub.subscribe("org-a", "10.0.0.2", *bells[3]);
  REQUIRE(a3);
  auto fourth_of_the_org = hub.subscribe("org-a", "10.0.0.3", *bells[4]);
  REQUIRE_FALSE(fourth_of_the_org);
  CHECK(fourth_of_the_org.err().code == errc::quota_exceeded);
  // Another organization has room of its own.
  auto b1 = hub.subscribe("org-b", "10.0.0.3", *bells[5]);
  REQUIRE(b1);
  CHECK(hub.streams() == 4);
  a1->reset();
  CHECK(hub.streams() == 3);
  CHECK(hub.subscribe("org-a", "10.0.0.1", *bells[6]));  // room again; made and dropped at once
  CHECK(hub.streams() == 3);
}

TEST_CASE("event hub: an append wakes that organization's streams only and is remembered") {
  boost::asio::io_context io;
  api::event_hub hub;
  boost::asio::steady_timer bell_a(io), bell_b(io);
  auto a = hub.subscribe("org-a", "x", bell_a);
  auto b = hub.subscribe("org-b", "y", bell_b);
  REQUIRE(a);
  REQUIRE(b);
  bool woke_a = false, woke_b = false;
  bell_a.expires_after(std::chrono::hours(1));
  bell_b.expires_after(std::chrono::hours(1));
  bell_a.async_wait([&](boost::system::error_code) { woke_a = true; });
  bell_b.async_wait([&](boost::system::error_code) { woke_b = true; });
  CHECK(hub.latest("org-a") == 0);
  hub.appended("org-a", 41);
  CHECK_FALSE(woke_a);  // queued, not run inside the commit
  io.poll();
  CHECK(woke_a);
  CHECK_FALSE(woke_b);
  CHECK(hub.latest("org-a") == 41);
  CHECK(hub.latest("org-b") == 0);
  hub.appended("org-c", 7);  // nobody follows it yet: remembered all the same
  CHECK(hub.latest("org-c") == 7);

  hub.close_all();
  io.poll();
  CHECK(woke_b);
  CHECK(hub.closing());
  boost::asio::steady_timer late(io);
  auto refused = hub.subscribe("org-a", "z", late);
  REQUIRE_FALSE(refused);
  CHECK(refused.err().code == errc::unavailable);
}
