// The background reader over a real SQLite file: reads run on its thread, with its connection,
// while the I/O thread keeps going; the caller resumes on its own thread; a full queue says so.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <thread>

#include "../store/temp_dir.hpp"
#include "sandfort/api/background_reader.hpp"
#include "sandfort/store/org_store.hpp"

using namespace sandfort;
namespace asio = boost::asio;

namespace {

struct fixture {
  testing::temp_dir dir;
  std::string path = dir.file("sandfort.db");
  std::unique_ptr<store::database> db = open();
  asio::io_context ioc;

  std::unique_ptr<store::database> open() {
    auto d = store::database::open(path);
    REQUIRE(d);
    return std::move(d).value();
  }
  std::unique_ptr<api::background_reader> reader(std::size_t max_waiting) {
    auto r = api::background_reader::open(path, max_waiting);
    REQUIRE(r);
    return std::move(r).value();
  }
};

}  // namespace

TEST_CASE("background reader: the read runs on its own thread and connection, the I/O thread keeps serving") {
  fixture f;
  auto made = store::org_store(*f.db).create_org("acme", false, "t");
  REQUIRE(made);
  auto reader = f.reader(4);
  std::promise<void> release;
  auto released = release.get_future().share();
  const auto io_thread = std::this_thread::get_id();
  std::thread::id read_thread, resumed_thread;
  std::optional<result<store::org>> got;
  int ticks = 0;

  asio::co_spawn(f.ioc, [&]() -> asio::awaitable<void> {
    auto read = [released, &read_thread, id = made->id](store::database& db) {
      read_thread = std::this_thread::get_id();
      released.wait();  // a long read
      return store::org_store(db).get_org(id);
    };
    got.emplace(co_await reader->run(std::move(read)));
    resumed_thread = std::this_thread::get_id();
  }, asio::detached);
  // While the read is held, the io_context keeps running other work.
  asio::co_spawn(f.ioc, [&]() -> asio::awaitable<void> {
    asio::steady_timer t(f.ioc);
    for (; ticks < 5; ++ticks) {
      t.expires_after(std::chrono::milliseconds(1));
      co_await t.async_wait(asio::use_awaitable);
    }
    release.set_value();
  }, asio::detached);
  f.ioc.run_for(std::chrono::seconds(30));

  CHECK(ticks == 5);
  REQUIRE(got);
  REQUIRE(*got);
  CHECK((*got)->name == "acme");
  CHECK(read_thread != io_thread);
  CHECK(resumed_thread == io_thread);
  CHECK(reader->in_flight() == 0);
}

TEST_CASE("background reader: beyond max_waiting a request is refused at once, the daemon's own work queues") {
  fixture f;
  auto reader = f.reader(2);
  std::promise<void> release;
  auto released = release.get_future().share();
  std::vector<std::optional<result<int>>> got(4);
  const auto start = [&](std::size_t i, bool queue_anyway) {
    asio::co_spawn(f.ioc, [&, i, queue_anyway]() -> asio::awaitable<void> {
      auto read = [released, i](store::database& db) -> result<int> {
        released.wait();
        if (auto ok = db.ping(); !ok) return std::move(ok).err();
        return static_cast<int>(i);
      };
      got[i].emplace(co_await reader->run(std::move(read), queue_anyway));
    }, asio::detached);
  };
  start(0, false);
  start(1, false);
  start(2, false);  // the queue holds two: refused
  start(3, true);   // queued anyway
  f.ioc.poll();
  REQUIRE(got[2]);
  REQUIRE_FALSE(*got[2]);
  CHECK(got[2]->err().code == errc::unavailable);
  CHECK_FALSE(got[0]);
  CHECK(reader->in_flight() == 3);

  release.set_value();
  f.ioc.run_for(std::chrono::seconds(30));
  for (int i : {0, 1, 3}) {
    REQUIRE(got[static_cast<std::size_t>(i)]);
    REQUIRE(*got[static_cast<std::size_t>(i)]);
    CHECK(**got[static_cast<std::size_t>(i)] == i);
  }
  CHECK(reader->in_flight() == 0);
}
