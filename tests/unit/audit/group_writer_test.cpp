// The group writer over a real SQLite file and a thread of its own: events queued while a commit
// runs go into the next one, in the order they were queued; the chain stays one line when the I/O
// thread's own connection appends between batches; an event without a canonical form fails
// alone; observers hear of each committed event on the caller's executor.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <thread>

#include "../store/open_db.hpp"
#include "../store/temp_dir.hpp"
#include "sandfort/audit/chain.hpp"
#include "sandfort/audit/group_writer.hpp"
#include "sandfort/audit/journal.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/org_store.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;
namespace asio = boost::asio;

namespace {

struct writer_fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = testing::open_db(dir.file("sandfort.db"));
  testing::manual_clock clk;
  std::unique_ptr<audit::group_writer> writer = audit::group_writer::open(dir.file("sandfort.db"), clk).value();
  asio::io_context ioc;
  std::string org_id = store::org_store(*db).create_org("acme", false, testing::t0).value().id;

  // n appends started at once from their own coroutines; each outcome lands in outcomes[i].
  void append_all(int n, std::vector<result<audit::event_record>>& outcomes, int float_at = -1,
                  const std::string& action = "sandbox.exec", bool lone = false) {
    outcomes.assign(static_cast<std::size_t>(n), make_error(errc::internal, "not done"));
    for (int i = 0; i < n; ++i) {
      nlohmann::json details = {{"i", i}};
      if (i == float_at) details["ratio"] = 0.5;  // no canonical form
      asio::co_spawn(
          ioc,
          [this, i, details, action, lone, &outcomes]() -> asio::awaitable<void> {
            audit::actor who{"key:key-" + std::to_string(i), "req-" + std::to_string(i), "10.0.0.1"};
            audit::record what{action, "sbx-1", "accepted", details};  // named: GCC 12 and temporaries
            auto done = co_await writer->append(org_id, who, std::move(what), lone);
            outcomes[static_cast<std::size_t>(i)] = std::move(done);
          },
          asio::detached);
    }
  }

  std::vector<audit::event_record> chain() {
    store::audit_filter f;
    f.limit = 1000;
    auto list = store::audit_store(*db).list_audit_events(org_id, f);
    REQUIRE(list);
    return *list;
  }
};

// Every event follows the one before it: seq one more, prev_hash its hash, its own hash right.
void check_one_line(const std::vector<audit::event_record>& chain) {
  for (std::size_t i = 0; i < chain.size(); ++i) {
    INFO("seq " << chain[i].seq);
    CHECK(chain[i].seq == static_cast<std::int64_t>(i) + 1);
    CHECK(chain[i].prev_hash == (i == 0 ? audit::genesis_hash() : chain[i - 1].hash));
    CHECK(chain[i].hash == audit::chain_hash(chain[i].prev_hash, chain[i]));
  }
}

struct counting_observer final : store::append_observer {
  std::vector<std::int64_t> seqs;
  std::thread::id told_on;
  void appended(const std::string&, std::int64_t seq) override {
    seqs.push_back(seq);
    told_on = std::this_thread::get_id();
  }
};

}  // namespace

TEST_CASE("group writer: events queued while a commit waits go into the next commit, in queue order", "[audit]") {
  writer_fixture f;
  counting_observer seen;
  f.writer->observe_appends(&seen, f.ioc.get_executor());
  // Another connection holds the write lock: the writer's first transaction waits for it, and
  // everything queued meanwhile must go into one second transaction.
  auto blocker = testing::open_db(f.dir.file("sandfort.db"));
  auto held = blocker->begin();
  REQUIRE(held);
  std::vector<result<audit::event_record>> outcomes;
  f.append_all(50, outcomes);
  f.ioc.poll();  // every coroutine has queued its event and waits
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(f.writer->committed().commits == 0);
  REQUIRE(held->commit());
  f.ioc.run();  // until every append is answered

  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    INFO("append " << i);
    REQUIRE(outcomes[i]);
    CHECK(outcomes[i]->details == R"({"i":)" + std::to_string(i) + "}");
  }
  auto counts = f.writer->committed();
  CHECK(counts.events == 50);
  // The writer's first transaction took what was queued when it woke (one event or all of
  // them) and waited for the lock; everything else went into the next one.
  CHECK(counts.commits <= 2);
  auto stored = f.chain();
  REQUIRE(stored.size() == 50);
  check_one_line(stored);
  for (std::size_t i = 0; i < stored.size(); ++i) CHECK(stored[i].request_id == "req-" + std::to_string(i));
  // Commands' rows are not life-cycle events: no observer is woken for them.
  CHECK(seen.seqs.empty());
}

TEST_CASE("group writer: observers hear of each life-cycle event after its commit, on the caller's executor",
          "[audit]") {
  writer_fixture f;
  counting_observer seen;
  f.writer->observe_appends(&seen, f.ioc.get_executor());
  std::vector<result<audit::event_record>> outcomes;
  f.append_all(20, outcomes, -1, "guardrail.exec_timeout");
  f.ioc.run();
  for (auto& o : outcomes) REQUIRE(o);
  std::vector<std::int64_t> expected(20);
  std::iota(expected.begin(), expected.end(), 1);
  CHECK(seen.seqs == expected);
  CHECK(seen.told_on == std::this_thread::get_id());
}

TEST_CASE("group writer: a lone event is committed by its caller when the writer is idle, and resumes it later",
          "[audit]") {
  writer_fixture f;
  counting_observer seen;
  f.writer->observe_appends(&seen, f.ioc.get_executor());
  std::vector<result<audit::event_record>> outcomes(10, make_error(errc::internal, "not done"));
  asio::co_spawn(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        for (std::size_t i = 0; i < outcomes.size(); ++i) {
          audit::actor who{"key:key-1", "req-" + std::to_string(i), "10.0.0.1"};
          audit::record what{"guardrail.exec_timeout", "sbx-1", "accepted", {{"i", i}}};
          outcomes[i] = co_await f.writer->append(f.org_id, who, std::move(what), true);
        }
      },
      asio::detached);
  // One step of the context runs the first append: its commit is done when the step returns,
  // but the caller is resumed by a later step, as with the writer's thread.
  REQUIRE(f.ioc.run_one() == 1);
  CHECK(f.writer->committed().lone_commits == 1);
  CHECK(!outcomes[0]);
  f.ioc.run();
  for (auto& o : outcomes) REQUIRE(o);
  auto counts = f.writer->committed();
  CHECK(counts.lone_commits == 10);
  CHECK(counts.commits == 10);
  CHECK(counts.events == 10);
  auto stored = f.chain();
  REQUIRE(stored.size() == 10);
  check_one_line(stored);
  std::vector<std::int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 1);
  CHECK(seen.seqs == expected);
  CHECK(seen.told_on == std::this_thread::get_id());
}

TEST_CASE("group writer: a lone event behind a busy writer is queued in its turn, its caller never waits for the "
          "lock",
          "[audit]") {
  writer_fixture f;
  auto blocker = testing::open_db(f.dir.file("sandfort.db"));
  auto held = blocker->begin();
  REQUIRE(held);
  std::vector<result<audit::event_record>> queued, lone;
  f.append_all(5, queued);
  f.ioc.poll();  // five events queued; the writer waits for the lock with one or all of them
  asio::co_spawn(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        audit::actor who{"key:key-lone", "req-lone", "10.0.0.1"};
        audit::record what{"sandbox.exec", "sbx-1", "accepted", {{"i", 5}}};
        lone.push_back(co_await f.writer->append(f.org_id, who, std::move(what), true));
      },
      asio::detached);
  f.ioc.poll();
  // Had the caller committed it, it would have waited here for the lock (the busy timeout),
  // and counted a lone commit.
  CHECK(f.writer->committed().lone_commits == 0);
  CHECK(lone.empty());
  REQUIRE(held->commit());
  f.ioc.run();
  REQUIRE(lone.size() == 1);
  REQUIRE(lone[0]);
  auto counts = f.writer->committed();
  CHECK(counts.lone_commits == 0);
  CHECK(counts.events == 6);
  auto stored = f.chain();
  REQUIRE(stored.size() == 6);
  check_one_line(stored);
  CHECK(stored.back().request_id == "req-lone");
}

TEST_CASE("group writer: a lone event while another connection holds the lock goes to the writer, its caller never "
          "waits",
          "[audit]") {
  writer_fixture f;
  auto blocker = testing::open_db(f.dir.file("sandfort.db"));
  auto held = blocker->begin();
  REQUIRE(held);
  // The lock is let go once the append has returned, or after a second: a caller that waited for
  // the lock would get it then and commit the event itself.
  std::mutex m;
  std::condition_variable cv;
  bool appended = false;
  bool released = false;  // Catch2's assertions are for this thread only
  std::thread release([&] {
    std::unique_lock lock(m);
    cv.wait_for(lock, std::chrono::seconds(1), [&] { return appended; });
    released = held->commit().ok();
  });
  std::vector<result<audit::event_record>> lone;
  f.append_all(1, lone, -1, "sandbox.exec", true);
  f.ioc.poll();
  // The writer was idle: the caller tried the lock, found it held and queued the event.
  CHECK(f.writer->committed().lone_commits == 0);
  {
    std::lock_guard lock(m);
    appended = true;
  }
  cv.notify_one();
  release.join();
  REQUIRE(released);
  f.ioc.run();
  REQUIRE(lone[0]);
  CHECK(f.writer->committed().events == 1);
  CHECK(f.chain().size() == 1);
}

TEST_CASE("group writer: the I/O thread's own appends between batches keep the chain one line", "[audit]") {
  writer_fixture f;
  audit::journal journal(*f.db, f.clk);
  std::vector<result<audit::event_record>> outcomes;
  for (int round = 0; round < 5; ++round) {
    f.append_all(10, outcomes);
    f.ioc.poll();
    // A change and its event, on the other connection, while the batch may be committing.
    auto changed = journal.record_change(
        {f.org_id}, audit::system_actor(), [] { return result<void>(ok_t{}); },
        [] { return audit::record{"org.update", "org-x"}; });
    REQUIRE(changed);
    f.ioc.restart();
    f.ioc.run();
    for (auto& o : outcomes) REQUIRE(o);
  }
  auto stored = f.chain();
  REQUIRE(stored.size() == 55);
  check_one_line(stored);
}

TEST_CASE("group writer: an event without a canonical form fails alone, the rest of its batch is stored", "[audit]") {
  writer_fixture f;
  std::vector<result<audit::event_record>> outcomes;
  f.append_all(20, outcomes, 7);
  f.ioc.run();
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    INFO("append " << i);
    CHECK(static_cast<bool>(outcomes[i]) == (i != 7));
  }
  CHECK(outcomes[7].err().code == errc::invalid_argument);
  auto stored = f.chain();
  CHECK(stored.size() == 19);
  check_one_line(stored);
}

TEST_CASE("group writer: what is queued when it is destroyed is committed first", "[audit]") {
  writer_fixture f;
  std::vector<result<audit::event_record>> outcomes;
  f.append_all(30, outcomes);
  f.ioc.poll();
  f.writer.reset();  // joins after the last commit
  CHECK(f.chain().size() == 30);
  f.ioc.run();  // the answers were posted before the join
  for (auto& o : outcomes) CHECK(o);
}

TEST_CASE("group writer: while a flood of queued events is written, the I/O thread's own changes get the write "
          "lock within its 20 ms",
          "[audit]") {
  // As sandfortd opens them (main.cpp): the I/O thread's connection waits at most 20 ms for the
  // write lock, retrying often enough to get in between two of the writer's batches.
  testing::temp_dir dir;
  auto db = testing::open_db(dir.file("sandfort.db"));
  db->set_busy_timeout(std::chrono::milliseconds(20));
  testing::manual_clock clk;
  auto writer = audit::group_writer::open(dir.file("sandfort.db"), clk).value();
  asio::io_context ioc;
  std::string org_id = store::org_store(*db).create_org("acme", false, testing::t0).value().id;
  audit::journal journal(*db, clk);

  // Everything queued at once (as when hundreds of commands arrive together): the writer then
  // takes full batches back to back.
  auto blocker = testing::open_db(dir.file("sandfort.db"));
  auto held = blocker->begin();
  REQUIRE(held);
  const int flood = 2000;
  int answered = 0;
  for (int i = 0; i < flood; ++i)
    asio::co_spawn(
        ioc,
        [&, i]() -> asio::awaitable<void> {
          audit::actor who{"key:key-1", "req-" + std::to_string(i), "10.0.0.1"};
          audit::record what{"sandbox.exec", "sbx-1", "accepted"};  // named: GCC 12 and temporaries
          auto done = co_await writer->append(org_id, who, std::move(what));
          if (done) ++answered;
        },
        asio::detached);
  ioc.poll();
  REQUIRE(held->commit());
  while (writer->committed().commits == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));

  const auto written_before = writer->committed().events;
  int refused = 0;
  for (int i = 0; i < 10; ++i) {
    auto changed = journal.record_change(
        {org_id}, audit::system_actor(), [] { return result<void>(ok_t{}); },
        [] { return audit::record{"org.update", "org-x"}; });
    if (!changed) {
      UNSCOPED_INFO("change " << i << ": " << changed.err().message);
      ++refused;
    }
  }
  CHECK(written_before < static_cast<std::uint64_t>(flood));  // the changes came while the flood was written
  CHECK(refused == 0);
  ioc.run();
  CHECK(answered == flood);
  CHECK(writer->committed().events == static_cast<std::uint64_t>(flood));
}
