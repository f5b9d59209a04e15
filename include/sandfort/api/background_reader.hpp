#pragma once
// Long reads off the I/O thread: an audit chain's verification or export, or the re-hashing
// before the first checkpoint of a long chain, take about a second per 100,000 events. They run
// here, on a thread of their own with a database connection of their own (WAL: a reader sees a
// snapshot and never blocks the writer), while the I/O thread keeps serving everyone else.
// Reads are taken one at a time and only a few may wait: beyond that the caller gets
// `unavailable` (503) at once, so that asking again and again cannot pile up work.

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <string>
#include <type_traits>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::api {

class background_reader {
 public:
  // Opens its own connection to the (already migrated) database file.
  static result<std::unique_ptr<background_reader>> open(const std::string& database_path, std::size_t max_waiting);
  ~background_reader();  // waits for the read in progress
  background_reader(const background_reader&) = delete;
  background_reader& operator=(const background_reader&) = delete;

  // Runs read(connection) on the reader's thread and resumes the caller on its own executor with
  // the result. `read` must use only the connection it is given and what it owns (capture by
  // value). Call from one thread (the I/O thread): the count of waiting reads is not atomic.
  // `unavailable` when max_waiting reads are queued already, unless `queue_anyway` (the daemon's
  // own periodic work, which must not be crowded out by requests).
  template <typename Read>
  boost::asio::awaitable<std::invoke_result_t<Read&, store::database&>> run(Read read, bool queue_anyway = false);

  std::size_t in_flight() const { return in_flight_; }

 private:
  background_reader(std::unique_ptr<store::database> db, std::size_t max_waiting);
  std::unique_ptr<store::database> db_;
  std::size_t max_in_flight_;
  std::size_t in_flight_ = 0;
  boost::asio::thread_pool thread_{1};
};

template <typename Read>
boost::asio::awaitable<std::invoke_result_t<Read&, store::database&>> background_reader::run(Read read, bool queue_anyway) {
  namespace asio = boost::asio;
  using outcome = std::invoke_result_t<Read&, store::database&>;
  if (in_flight_ >= max_in_flight_ && !queue_anyway)
    co_return make_error(errc::unavailable, std::to_string(in_flight_) + " long reads of the audit log are running or waiting; try again later");
  ++in_flight_;
  struct done {
    std::size_t& n;
    ~done() { --n; }
  } count{in_flight_};
  auto home = co_await asio::this_coro::executor;
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(outcome)>(
      [this, home, &read](auto handler) {
        asio::post(thread_, [this, home, read = std::move(read), handler = std::move(handler)]() mutable {
          outcome r = read(*db_);
          asio::post(home, [handler = std::move(handler), r = std::move(r)]() mutable { std::move(handler)(std::move(r)); });
        });
      },
      asio::use_awaitable);
}

}  // namespace sandfort::api
