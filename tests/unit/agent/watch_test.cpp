// Directory watching: the inotify hub in process (events, names, recursion, bounds, the
// backlog's overflow, the end), then GET /files/watch of the real binary over its socket.

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "agent_process.hpp"
#include "session_support.hpp"
#include "support.hpp"
#include "watch/watcher.hpp"

using namespace sandfort;
using namespace sandfort::agent;
using namespace sandfort::agent::test;
namespace asio = boost::asio;
namespace stdfs = std::filesystem;

namespace {

// Narrows the bounds for one test and restores them after it.
class narrowed_bounds {
 public:
  template <typename Change>
  explicit narrowed_bounds(Change change) {
    watch::limits l = saved_;
    change(l);
    watch::configure(l);
  }
  ~narrowed_bounds() { watch::configure(saved_); }
  narrowed_bounds(const narrowed_bounds&) = delete;
  narrowed_bounds& operator=(const narrowed_bounds&) = delete;

 private:
  watch::limits saved_ = watch::current_limits();
};

// A refused open: its class, and words its message must have.
template <typename Result>
void check_refused(const Result& r, errc code, const std::string& words) {
  REQUIRE_FALSE(r);
  CHECK(r.err().code == code);
  CHECK(r.err().message.find(words) != std::string::npos);
}

// Runs the io_context until `want` events arrived (or the watch ended, or 3 s passed).
std::vector<watch::event> collect(asio::io_context& ioc, watch::watcher& w, std::size_t want) {
  std::vector<watch::event> got;
  bool done = false;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        while (got.size() < want) {
          auto batch = co_await w.next();
          if (batch.empty()) break;
          for (auto& e : batch) got.push_back(std::move(e));
        }
        done = true;
        ioc.stop();
      },
      asio::detached);
  ioc.restart();
  ioc.run_for(std::chrono::seconds(3));
  REQUIRE(done);
  return got;
}

std::string show(const std::vector<watch::event>& events) {
  std::string out;
  for (const auto& e : events) out += std::string(watch::to_string(e.type)) + " " + e.name + "; ";
  return out;
}

// True when want (type name) appear in events in this order (other events may come between).
bool in_order(const std::vector<watch::event>& events, const std::vector<std::pair<std::string, std::string>>& want) {
  std::size_t i = 0;
  for (const auto& e : events)
    if (i < want.size() && watch::to_string(e.type) == want[i].first && e.name == want[i].second) ++i;
  return i == want.size();
}

}  // namespace

TEST_CASE("a watch reports create, write, chmod, rename and remove by name, in order") {
  temp_dir dir;
  asio::io_context ioc;
  auto w = watch::hub::of(ioc.get_executor()).open(ioc.get_executor(), dir.path(), false);
  REQUIRE(w);
  CHECK((*w)->directories() == 1);
  write_file(dir.path() + "/a.txt", "hello");
  ::chmod((dir.path() + "/a.txt").c_str(), 0600);
  stdfs::rename(dir.path() + "/a.txt", dir.path() + "/b.txt");
  stdfs::remove(dir.path() + "/b.txt");
  auto got = collect(ioc, **w, 6);
  INFO(show(got));
  CHECK(in_order(got, {{"create", "a.txt"},
                       {"write", "a.txt"},
                       {"chmod", "a.txt"},
                       {"rename", "a.txt"},
                       {"create", "b.txt"},
                       {"remove", "b.txt"}}));
}

TEST_CASE("without recursive, only the directory's own entries are reported") {
  temp_dir dir;
  asio::io_context ioc;
  auto w = watch::hub::of(ioc.get_executor()).open(ioc.get_executor(), dir.path(), false);
  REQUIRE(w);
  stdfs::create_directory(dir.path() + "/sub");
  write_file(dir.path() + "/sub/inner.txt", "x");
  write_file(dir.path() + "/top.txt", "y");
  auto got = collect(ioc, **w, 3);
  INFO(show(got));
  CHECK(in_order(got, {{"create", "sub"}, {"create", "top.txt"}}));
  CHECK(got.front().is_dir);
  for (const auto& e : got) CHECK(e.name.find("inner") == std::string::npos);
}

TEST_CASE("a recursive watch follows subdirectories, existing and new, and renamed ones under their new name") {
  temp_dir dir;
  stdfs::create_directories(dir.path() + "/old/deep");
  asio::io_context ioc;
  auto w = watch::hub::of(ioc.get_executor()).open(ioc.get_executor(), dir.path(), true);
  REQUIRE(w);
  CHECK((*w)->directories() == 3);
  write_file(dir.path() + "/old/deep/a.txt", "1");
  auto first = collect(ioc, **w, 2);
  INFO(show(first));
  CHECK(in_order(first, {{"create", "old/deep/a.txt"}}));

  stdfs::create_directory(dir.path() + "/new");
  auto made = collect(ioc, **w, 1);
  CHECK(in_order(made, {{"create", "new"}}));
  write_file(dir.path() + "/new/b.txt", "2");
  auto inside = collect(ioc, **w, 1);
  INFO(show(inside));
  CHECK(in_order(inside, {{"create", "new/b.txt"}}));

  stdfs::rename(dir.path() + "/old", dir.path() + "/moved");
  auto moved = collect(ioc, **w, 2);
  INFO(show(moved));
  CHECK(in_order(moved, {{"rename", "old"}, {"create", "moved"}}));
  write_file(dir.path() + "/moved/deep/c.txt", "3");
  auto after = collect(ioc, **w, 1);
  INFO(show(after));
  CHECK(in_order(after, {{"create", "moved/deep/c.txt"}}));
}

TEST_CASE("the watched path must exist and be a directory") {
  temp_dir dir;
  write_file(dir.path() + "/file", "x");
  asio::io_context ioc;
  auto& hub = watch::hub::of(ioc.get_executor());
  check_refused(hub.open(ioc.get_executor(), dir.path() + "/nope", false), errc::not_found, "no such directory");
  check_refused(hub.open(ioc.get_executor(), dir.path() + "/file", false), errc::invalid_argument, "not a directory");
  CHECK(hub.watches() == 0);
  CHECK_FALSE(hub.instance_open());
}

TEST_CASE("watches per sandbox are bounded, and one instance serves them all while any is open") {
  narrowed_bounds restore([](watch::limits& l) { l.max_watches = 2; });
  temp_dir dir;
  asio::io_context ioc;
  auto& hub = watch::hub::of(ioc.get_executor());
  auto a = hub.open(ioc.get_executor(), dir.path(), false);
  auto b = hub.open(ioc.get_executor(), dir.path(), true);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(hub.instance_open());
  check_refused(hub.open(ioc.get_executor(), dir.path(), false), errc::quota_exceeded, "directory watches");
  // Two watches of one directory share the kernel's watch: each still hears every event.
  write_file(dir.path() + "/x", "1");
  CHECK(in_order(collect(ioc, **a, 1), {{"create", "x"}}));
  CHECK(in_order(collect(ioc, **b, 1), {{"create", "x"}}));
  a->reset();
  write_file(dir.path() + "/y", "1");
  CHECK(in_order(collect(ioc, **b, 2), {{"create", "y"}}));
  auto again = hub.open(ioc.get_executor(), dir.path(), false);
  CHECK(again);
  again->reset();
  b->reset();
  CHECK(hub.watches() == 0);
  CHECK_FALSE(hub.instance_open());
}

TEST_CASE("directories under a recursive watch are bounded: an error at the start, a limit event later") {
  narrowed_bounds restore([](watch::limits& l) { l.max_directories = 3; });
  temp_dir dir;
  stdfs::create_directories(dir.path() + "/a/b/c");
  asio::io_context ioc;
  auto& hub = watch::hub::of(ioc.get_executor());
  check_refused(hub.open(ioc.get_executor(), dir.path(), true), errc::quota_exceeded, "at most 3 directories");
  CHECK(hub.watches() == 0);

  auto w = hub.open(ioc.get_executor(), dir.path() + "/a", true);  // a, b, c: exactly the bound
  REQUIRE(w);
  stdfs::create_directory(dir.path() + "/a/d");
  auto got = collect(ioc, **w, 2);
  INFO(show(got));
  CHECK(in_order(got, {{"create", "d"}, {"limit", "d"}}));
  CHECK((*w)->directories() == 3);
}

TEST_CASE("a reader that falls behind gets one overflow event, never a growing queue") {
  narrowed_bounds restore([](watch::limits& l) { l.backlog = 8; });
  temp_dir dir;
  asio::io_context ioc;
  auto w = watch::hub::of(ioc.get_executor()).open(ioc.get_executor(), dir.path(), false);
  REQUIRE(w);
  for (int i = 0; i < 200; ++i) write_file(dir.path() + "/f" + std::to_string(i), "x");
  // Let the hub read everything the kernel queued, without the reader taking any.
  ioc.restart();
  ioc.run_for(std::chrono::milliseconds(300));
  CHECK((*w)->queued() <= 8);
  auto got = collect(ioc, **w, 1);
  REQUIRE(got.size() <= 8);
  CHECK(got.back().type == watch::event_type::overflow);
  CHECK(got.back().dropped > 100);
  // After the overflow it goes on as before.
  write_file(dir.path() + "/later", "x");
  CHECK(in_order(collect(ioc, **w, 1), {{"create", "later"}}));
}

TEST_CASE("removing the watched directory ends the watch") {
  temp_dir dir;
  stdfs::create_directory(dir.path() + "/w");
  asio::io_context ioc;
  auto w = watch::hub::of(ioc.get_executor()).open(ioc.get_executor(), dir.path() + "/w", true);
  REQUIRE(w);
  stdfs::remove(dir.path() + "/w");
  auto got = collect(ioc, **w, 10);  // stops early: the watch ended
  INFO(show(got));
  REQUIRE_FALSE(got.empty());
  CHECK(got.back().type == watch::event_type::end);
  CHECK(got.back().message.find("removed") != std::string::npos);
  CHECK(collect(ioc, **w, 1).empty());
}

TEST_CASE("GET /files/watch streams events as server-sent events, and a client that leaves frees its watch") {
  temp_dir dir;
  stdfs::create_directory(dir.path() + "/w");
  agent_process agent(dir.path() + "/agent.sock");
  REQUIRE(wait_healthy(agent.socket()));
  const std::string target = "/files/watch?path=" + dir.path() + "/w&recursive=true&include_entry=true";

  SECTION("events with entries") {
    raw_client c(agent.socket());
    c.send("GET", target, "", true);
    REQUIRE(c.read_head() == 200);
    CHECK(c.head().find("text/event-stream") != std::string::npos);
    auto start = c.next_event();
    REQUIRE(start);
    CHECK(start->name == "start");
    CHECK(nlohmann::json::parse(start->data)["directories"] == 1);
    stdfs::create_directory(dir.path() + "/w/sub");
    auto made = c.next_event();
    REQUIRE(made);
    CHECK(made->name == "create");
    auto j = nlohmann::json::parse(made->data);
    CHECK(j["name"] == "sub");
    CHECK(j["is_dir"] == true);
    CHECK(j["entry"]["type"] == "dir");
    write_file(dir.path() + "/w/sub/f.txt", "abc");
    bool seen = false;
    for (int i = 0; i < 4 && !seen; ++i) {
      auto e = c.next_event();
      REQUIRE(e);
      auto d = nlohmann::json::parse(e->data);
      seen = e->name == "create" && d["name"] == "sub/f.txt";
    }
    CHECK(seen);
    stdfs::remove_all(dir.path() + "/w");
    std::string last;
    while (auto e = c.next_event()) last = e->name;
    CHECK(last == "end");
  }

  SECTION("errors before the stream are plain JSON answers") {
    raw_client missing(agent.socket());
    missing.send("GET", "/files/watch?path=" + dir.path() + "/nope", "", true);
    CHECK(missing.read_head() == 404);
    raw_client relative(agent.socket());
    relative.send("GET", "/files/watch?path=w", "", true);
    CHECK(relative.read_head() == 400);
  }

  SECTION("the bound on watches, and watches freed by clients that left") {
    const std::size_t bound = watch::limits{}.max_watches;
    std::vector<std::unique_ptr<raw_client>> open;
    for (std::size_t i = 0; i < bound; ++i) {
      open.push_back(std::make_unique<raw_client>(agent.socket()));
      open.back()->send("GET", target, "", true);
      REQUIRE(open.back()->read_head() == 200);
    }
    raw_client refused(agent.socket());
    refused.send("GET", target, "", true);
    CHECK(refused.read_head() == 429);
    CHECK(refused.read_body().find("quota_exceeded") != std::string::npos);
    open.clear();  // every client leaves
    CHECK(eventually([&] {
      raw_client again(agent.socket());
      again.send("GET", target, "", true);
      return again.read_head() == 200;
    }));
  }
}
