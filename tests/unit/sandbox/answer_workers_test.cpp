// Large agent answers are parsed and encoded on the answer workers: the work runs on another
// thread at a lower priority, the caller resumes on its own thread (where the I/O goes on
// meanwhile), and what the work throws reaches the caller.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <stdexcept>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/answer_workers.hpp"

using namespace sandfort::sandbox;
namespace asio = boost::asio;

TEST_CASE("answer workers: the work runs off the I/O thread, below its priority, and the caller resumes on it",
          "[sandbox][answer_workers]") {
  asio::io_context ioc;
  answer_workers workers(2);
  const auto io_thread = std::this_thread::get_id();
  std::promise<void> release;
  auto released = release.get_future().share();
  std::thread::id worked_on, resumed_on;
  int nice_there = 0;
  int ticks = 0;
  bool done = false;

  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    // Named: GCC 12 mishandles temporaries inside co_await expressions.
    auto work = [&worked_on, &nice_there, released, big = std::string(1 << 20, 'x')] {
      worked_on = std::this_thread::get_id();
      errno = 0;
      nice_there = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
      released.wait();  // held until the I/O thread has shown it keeps running
      return big.substr(0, 3);
    };
    std::string answer = co_await workers.run(std::move(work));
    resumed_on = std::this_thread::get_id();
    CHECK(answer == "xxx");
    done = true;
  }, asio::detached);
  // While the work is held, the I/O thread runs other handlers.
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (; ticks < 5; ++ticks) {
      t.expires_after(std::chrono::milliseconds(2));
      co_await t.async_wait(asio::use_awaitable);
    }
    release.set_value();
  }, asio::detached);
  ioc.run();

  CHECK(done);
  CHECK(ticks == 5);
  CHECK(worked_on != io_thread);
  CHECK(resumed_on == io_thread);
  const int own = ::getpriority(PRIO_PROCESS, 0);
  CHECK(nice_there == std::min(own + 10, 19));
}

TEST_CASE("answer workers: an exception of the work is the caller's", "[sandbox][answer_workers]") {
  asio::io_context ioc;
  answer_workers workers(1);
  bool caught = false;
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    try {
      auto work = []() -> int { throw std::runtime_error("no memory"); };
      co_await workers.run(std::move(work));
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "no memory";
    }
  }, asio::detached);
  ioc.run();
  CHECK(caught);
}

TEST_CASE("budget share: holds what it took until its last owner is gone", "[sandbox][answer_workers]") {
  response_budget budget(100);
  {
    auto share = std::make_shared<budget_share>(budget);
    CHECK(share->try_take(60));
    CHECK_FALSE(share->try_take(41));  // over the budget: nothing more taken
    CHECK(share->held() == 60);
    auto kept = share;  // the result that carries it, on its way to the caller
    share.reset();
    CHECK(budget.in_use() == 60);
  }
  CHECK(budget.in_use() == 0);
}
