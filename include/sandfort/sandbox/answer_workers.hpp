#pragma once
// CPU work on large agent answers off the I/O thread: parsing an agent's exec result and encoding
// the API's. Six parallel execs printing 10 MiB of random bytes per stream (`binary: true`, about
// 55 MB of JSON each way) took the daemon's one I/O thread for 1.7 s: /healthz and every other
// tenant's requests waited that long. Here a few threads at a lower priority than the I/O thread
// do that work while it keeps serving. What the work holds in memory is bounded by the answers'
// budget (agent_connector.hpp: each large answer holds a share until it is written), and so is
// what can be queued here.

#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

namespace sandfort::sandbox {

class answer_workers {
 public:
  // Under this many bytes an answer is parsed or encoded where it is: a millisecond or less, less
  // than the trip to a worker and back costs in latency.
  static constexpr std::size_t inline_bytes = 256 * 1024;

  explicit answer_workers(std::size_t threads);
  ~answer_workers();  // finishes what is queued, then joins
  answer_workers(const answer_workers&) = delete;
  answer_workers& operator=(const answer_workers&) = delete;

  // Runs fn() on a worker and resumes the caller on its own executor with what fn returned (or
  // its exception). fn must own everything it touches (capture by move) and leave alone what
  // belongs to the I/O thread (the budget: a share is dropped by its caller, never by fn).
  template <typename Fn>
  boost::asio::awaitable<std::invoke_result_t<Fn&>> run(Fn fn);

 private:
  boost::asio::io_context context_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> keep_running_;
  std::vector<std::thread> threads_;
};

template <typename Fn>
boost::asio::awaitable<std::invoke_result_t<Fn&>> answer_workers::run(Fn fn) {
  namespace asio = boost::asio;
  using outcome = std::invoke_result_t<Fn&>;
  auto home = co_await asio::this_coro::executor;
  // An exception_ptr first: use_awaitable rethrows it in the caller (bad_alloc, say).
  auto r = co_await asio::async_initiate<decltype(asio::use_awaitable), void(std::exception_ptr, std::optional<outcome>)>(
      [this, home, &fn](auto handler) {
        asio::post(context_, [home, fn = std::move(fn), handler = std::move(handler)]() mutable {
          std::optional<outcome> done;
          std::exception_ptr failed;
          try {
            done.emplace(fn());
          } catch (...) {
            failed = std::current_exception();
          }
          asio::post(home, [handler = std::move(handler), failed, done = std::move(done)]() mutable {
            std::move(handler)(failed, std::move(done));
          });
        });
      },
      asio::use_awaitable);
  co_return std::move(*r);
}

}  // namespace sandfort::sandbox
