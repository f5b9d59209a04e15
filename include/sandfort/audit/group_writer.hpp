#pragma once
// Audit events that stand alone (a command run, a file written, a terminal opened), appended by a
// thread of their own in group commits: every event queued while the previous commit ran goes
// into the next transaction. The caller is resumed only once the transaction that holds its
// event has committed, so the request is answered after its event is durable, as when each
// event had a transaction of its own on the I/O thread; what changes is that a busy daemon
// writes a batch of events in one transaction (one lock, one WAL write of the pages they share)
// off the I/O thread (measured: bench/exec_path.py, docs/performance.md). A lone event (its
// caller has no other call in progress, and nothing is queued or being committed) is committed
// on the caller's thread instead when the write lock is free at that moment (the caller never
// waits for it: it is queued then): there is nothing to group it with, and handing it over would
// only add two wake-ups to its request, one of them of a thread on an idle core.
//
// The order of the chain is the order of the commits: events of one batch in the order they
// were queued, so a client's sequential calls keep their order. Changes with their events
// (journal::record_change) still commit together on the I/O thread's connection; SQLite's write
// lock orders them with the batches, and each append reads its chain's head inside its own
// transaction, so the chain stays one line whoever appends.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "sandfort/audit/journal.hpp"
#include "sandfort/core/clock.hpp"
#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::audit {

namespace detail {
struct appends_home;  // the observer of committed appends, on the I/O thread
class append_notes;  // the writer connection's observer: the appends of the batch being committed
}  // namespace detail

class group_writer {
 public:
  // Opens a connection of its own to the (already migrated) database file and starts its thread.
  // At most max_batch events go into one transaction: the write lock is held for a batch, and the
  // I/O thread's own changes wait for it (store busy timeout), so a batch stays short.
  static result<std::unique_ptr<group_writer>> open(const std::string& database_path, const clock& clk,
                                                    std::size_t max_batch = 64);
  ~group_writer();  // commits what is queued, then joins
  group_writer(const group_writer&) = delete;
  group_writer& operator=(const group_writer&) = delete;

  // Each committed append is told to `observer` on `home` (GET /v1/events, webhooks), as the I/O
  // thread's connection tells it of its own. Set before the first append; null detaches.
  void observe_appends(store::append_observer* observer, boost::asio::any_io_executor home);

  // Appends r to org_id's chain; resumes the caller on its own executor with the sealed event once
  // it is committed, or with why it is not stored. `lone`: the caller has nothing else in
  // progress and holds no transaction open, so that its thread may commit the event itself
  // (see the top) when the writer is idle.
  boost::asio::awaitable<result<event_record>> append(std::string org_id, actor who, record r, bool lone = false);

  // Transactions committed and events in them since open (for tests and benchmarks).
  struct counts {
    std::uint64_t commits = 0;
    std::uint64_t events = 0;
    std::uint64_t lone_commits = 0;  // of commits: on the caller's thread
  };
  counts committed() const;

 private:
  using done_handler = boost::asio::any_completion_handler<void(result<event_record>)>;
  struct pending {
    std::string org_id;
    actor who;
    record what;
    done_handler done;
    boost::asio::any_io_executor home;  // where done runs: the caller's executor
  };
  group_writer(std::unique_ptr<store::database> db, const clock& clk, std::size_t max_batch);
  void submit(pending p, bool lone);
  void run();
  // Commits batch in tx (or fails every event of it with tx's error), then resumes the callers.
  void commit(std::deque<pending>& batch, result<store::transaction> tx);

  std::unique_ptr<store::database> db_;
  journal journal_;
  std::size_t max_batch_;
  std::shared_ptr<detail::appends_home> observed_;
  std::unique_ptr<detail::append_notes> notes_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<pending> queue_;
  bool committing_ = false;  // a batch is being committed, by the writer's thread or a lone caller
  bool stopping_ = false;
  counts counts_;
  std::thread thread_;  // last: started once everything above exists
};

inline boost::asio::awaitable<result<event_record>> group_writer::append(std::string org_id, actor who, record r,
                                                                       bool lone) {
  namespace asio = boost::asio;
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(result<event_record>)>(
      [this, &org_id, &who, &r, lone](auto handler) {
        // Tracked: the caller's io_context does not run out of work while its event is committed.
        boost::asio::any_io_executor home =
            asio::prefer(asio::get_associated_executor(handler), asio::execution::outstanding_work.tracked);
        submit(pending{std::move(org_id), std::move(who), std::move(r), done_handler(std::move(handler)), home}, lone);
      },
      asio::use_awaitable);
}

}  // namespace sandfort::audit
