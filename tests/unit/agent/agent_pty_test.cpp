// Starts the real sandfort-agent binary on a temporary unix socket and drives GET /pty over a
// WebSocket with the wsclient library, the way sandfortd's clients will. Every wait is bounded.

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <dirent.h>
#include <spawn.h>

#include <cctype>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "sandfort/http/client.hpp"
#include "support/wsclient.hpp"
#include "agent_process.hpp"
#include "support.hpp"
#include "support/prerequisite.hpp"

extern char** environ;

using namespace sandfort;
using namespace sandfort::agent::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace asio = boost::asio;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

std::string percent_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// Control characters made visible, for failure messages.
std::string visible(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n\n";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// One terminal session, driven step by step: each call runs the io_context until its step is done.
class terminal_client {
 public:
  explicit terminal_client(std::string socket) : socket_(std::move(socket)) {}

  result<void> open(const std::string& target, wsclient::options opts = {}) {
    auto connected = await(wsclient::client::connect_unix(socket_, target, std::move(opts)));
    if (!connected) return std::move(connected).err();
    ws_.emplace(std::move(*connected));
    return {};
  }

  void type(const std::string& keys) {
    auto sent = await(ws_->send_binary(keys));
    REQUIRE(sent.ok());
  }

  void send_control(const std::string& text) {
    auto sent = await(ws_->send_text(text));
    REQUIRE(sent.ok());
  }

  void resize(int cols, int rows) { send_control(json{{"type", "resize"}, {"cols", cols}, {"rows", rows}}.dump()); }

  // Reads until the terminal output after the previous match contains pattern. False at the
  // deadline or the end of the session; the output so far is then reported.
  bool expect(std::string_view pattern, milliseconds limit = 10s) {
    auto deadline = steady::now() + limit;
    for (;;) {
      if (auto at = output_.find(pattern, mark_); at != std::string::npos) {
        mark_ = at + pattern.size();
        return true;
      }
      if (closed_ || !read_one(deadline)) {
        UNSCOPED_INFO("waited for '" << visible(pattern) << "'; output: " << visible(output_) << "; " << last_error_);
        return false;
      }
    }
  }

  // The next control message from the agent.
  std::optional<json> next_control(milliseconds limit = 10s) {
    auto deadline = steady::now() + limit;
    while (controls_.empty()) {
      if (closed_ || !read_one(deadline)) {
        UNSCOPED_INFO("no control message; output: " << visible(output_) << "; " << last_error_);
        return std::nullopt;
      }
    }
    json j = controls_.front();
    controls_.pop_front();
    return j;
  }

  // The close frame's code, once it has come.
  std::optional<std::uint16_t> wait_closed(milliseconds limit = 10s) {
    auto deadline = steady::now() + limit;
    while (!closed_)
      if (!read_one(deadline)) break;
    return close_code_;
  }

  void close() {
    auto closed = await(ws_->close(1000));
    CHECK(closed.ok());
  }
  void abort() { ws_->abort(); }
  std::optional<std::string> response_header(std::string_view name) const { return ws_->response_header(name); }
  const std::string& output() const { return output_; }

 private:
  template <typename T>
  T await(asio::awaitable<T> work) {
    std::optional<T> out;
    asio::co_spawn(
        ioc_, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(work)); },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
    ioc_.restart();
    ioc_.run();
    if (!out) throw std::runtime_error("a step of the terminal session did not finish");
    return std::move(*out);
  }

  bool read_one(steady::time_point deadline) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
    if (left <= milliseconds::zero()) {
      last_error_ = "deadline passed";
      return false;
    }
    auto frame = await(ws_->read(left));
    if (!frame) {
      last_error_ = frame.err().message;
      closed_ = true;
      return false;
    }
    if (frame->is_close) {
      closed_ = true;
      close_code_ = frame->close_code;
    } else if (frame->is_text) {
      controls_.push_back(json::parse(frame->data));
    } else {
      output_ += frame->data;
    }
    return true;
  }

  std::string socket_;
  asio::io_context ioc_;
  std::optional<wsclient::client> ws_;
  std::string output_;
  std::size_t mark_ = 0;
  std::deque<json> controls_;
  bool closed_ = false;
  std::optional<std::uint16_t> close_code_;
  std::string last_error_;
};

// Waits (bounded) until the file holds the pid of a process that runs `comm` (it has executed).
pid_t wait_for_pid(const std::string& pid_file, const std::string& comm) {
  auto deadline = steady::now() + 10s;
  while (steady::now() < deadline) {
    pid_t pid = std::atoi(read_file(pid_file).c_str());
    if (pid > 0 && read_file("/proc/" + std::to_string(pid) + "/comm") == comm + "\n") return pid;
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  while (dirent* entry = proc ? ::readdir(proc) : nullptr) {
    pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(pid);
  }
  if (proc) ::closedir(proc);
  return out;
}

// The agent reaps what it started: no children left (running or zombie) within the limit.
bool no_children(pid_t agent, milliseconds limit = 10s) {
  auto deadline = steady::now() + limit;
  while (!children_of(agent).empty()) {
    if (steady::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

long rss_kib(pid_t pid) {
  std::istringstream status(read_file("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

bool on_path(const std::string& program) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"})
    if (::access((std::string(dir) + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

struct agent_fixture {
  agent_fixture() : agent(dir / "agent.sock") { REQUIRE(wait_healthy(agent.socket())); }
  temp_dir dir;
  agent_process agent;
};

}  // namespace

TEST_CASE_METHOD(agent_fixture, "the PTY runs a shell on a terminal of the requested size") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty?cols=80&rows=24").ok());

  term.type("stty size\r");
  CHECK(term.expect("24 80"));

  term.resize(100, 30);
  term.type("stty size\r");
  CHECK(term.expect("30 100"));

  // Quotes in what is typed keep the echo of the command line from matching its output.
  term.type("echo h''i\r");
  CHECK(term.expect("hi\r\n"));

  term.type("echo \"term=$TERM\"; tty\r");
  CHECK(term.expect("term=xterm-256color\r\n/dev/pts/"));

  term.close();
  CHECK(no_children(agent.pid()));
}

TEST_CASE_METHOD(agent_fixture, "Ctrl-C typed by the client interrupts the foreground job") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty").ok());
  std::string pid_file = dir / "fg.pid";
  term.type("sh -c 'echo $$ > " + pid_file + "; exec sleep 100'\r");
  pid_t sleeper = wait_for_pid(pid_file, "sleep");
  REQUIRE(sleeper > 0);

  term.type("\x03");
  term.type("echo af''ter\r");
  CHECK(term.expect("after\r\n", 5s));
  CHECK(wait_gone(sleeper, 5s));
}

TEST_CASE_METHOD(agent_fixture, "the program's exit ends the session with its exit code") {
  terminal_client term(agent.socket());

  SECTION("the shell exits") {
    REQUIRE(term.open("/pty?cols=80&rows=24").ok());
    term.type("exit 5\r");
  }
  SECTION("a command given in the query") {
    REQUIRE(term.open("/pty?command=" + percent_encode("echo one; exit 5")).ok());
    CHECK(term.expect("one\r\n"));
  }

  auto exit = term.next_control();
  REQUIRE(exit);
  CHECK(*exit == json{{"type", "exit"}, {"exit_code", 5}});
  CHECK(term.wait_closed() == std::uint16_t{1000});
  CHECK(no_children(agent.pid()));
}

TEST_CASE_METHOD(agent_fixture, "the program's last output arrives before its exit message") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty?command=" + percent_encode("seq 1 20000; exit 2")).ok());
  auto exit = term.next_control(20s);
  REQUIRE(exit);
  CHECK((*exit)["exit_code"] == 2);
  CHECK(term.output().find("\r\n20000\r\n") != std::string::npos);
}

TEST_CASE_METHOD(agent_fixture, "leaving the session ends the program") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty").ok());
  std::string pid_file = dir / "victim.pid";

  SECTION("closing the WebSocket") {
    term.type("sh -c 'echo $$ > " + pid_file + "; exec sleep 1000'\r");
    pid_t sleeper = wait_for_pid(pid_file, "sleep");
    REQUIRE(sleeper > 0);
    term.close();
    CHECK(wait_gone(sleeper, 5s));
  }
  SECTION("dropping the connection") {
    term.type("sh -c 'echo $$ > " + pid_file + "; exec sleep 1000'\r");
    pid_t sleeper = wait_for_pid(pid_file, "sleep");
    REQUIRE(sleeper > 0);
    term.abort();
    CHECK(wait_gone(sleeper, 5s));
  }
  SECTION("a program that ignores SIGHUP is killed after the grace period") {
    term.type("sh -c 'trap \"\" HUP; echo $$ > " + pid_file + "; exec sleep 1000'\r");
    pid_t sleeper = wait_for_pid(pid_file, "sleep");
    REQUIRE(sleeper > 0);
    term.abort();
    CHECK(wait_gone(sleeper, 8s));
  }
  CHECK(no_children(agent.pid()));
}

TEST_CASE_METHOD(agent_fixture, "what cannot start is refused with HTTP 400 before the upgrade") {
  terminal_client term(agent.socket());

  SECTION("a missing cwd") {
    auto refused = term.open("/pty?cwd=" + percent_encode(dir / "missing"));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.err().code == errc::invalid_argument);
    CHECK(refused.err().message.find("HTTP 400") != std::string::npos);
    CHECK(refused.err().message.find("does not exist") != std::string::npos);
  }
  SECTION("a size out of range") {
    auto refused = term.open("/pty?cols=0");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.err().code == errc::invalid_argument);
    CHECK(refused.err().message.find("cols") != std::string::npos);
  }
  SECTION("no upgrade at all") {
    auto res = run_coroutine(http::unix_request(agent.socket(), http::make_request(http::verb::get, "/pty"), {}));
    REQUIRE(res.ok());
    CHECK(res->result_int() == 400);
    CHECK(res->body().find("WebSocket") != std::string::npos);
  }
  CHECK(children_of(agent.pid()).empty());
}

TEST_CASE_METHOD(agent_fixture, "the shell starts in the requested cwd") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty?cwd=" + percent_encode(dir.path())).ok());
  term.type("pwd\r");
  CHECK(term.expect(dir.path() + "\r\n"));
}

TEST_CASE_METHOD(agent_fixture, "malformed control messages are answered and the session goes on") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty").ok());
  for (const char* bad : {"not json", R"({"type":"bogus"})", R"({"type":"resize","cols":0,"rows":10})"}) {
    INFO("control: " << bad);
    term.send_control(bad);
    auto reply = term.next_control();
    REQUIRE(reply);
    CHECK((*reply)["type"] == "error");
    CHECK_FALSE((*reply)["message"].get<std::string>().empty());
  }
  term.type("echo still''-here\r");
  CHECK(term.expect("still-here\r\n"));
}

TEST_CASE_METHOD(agent_fixture, "full-screen programs see a terminal") {
  if (!on_path("top")) return sandfort::testing::missing_prerequisite("top is not installed (Debian: procps)");
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty?cols=100&rows=30&command=top").ok());
  CHECK(term.expect("\x1b["));  // escape sequences: it drives the screen
  CHECK(term.expect("PID"));
  term.type("q");
  auto exit = term.next_control();
  REQUIRE(exit);
  CHECK(*exit == json{{"type", "exit"}, {"exit_code", 0}});
  CHECK(term.wait_closed() == std::uint16_t{1000});
}

TEST_CASE_METHOD(agent_fixture, "a client that does not read holds the program back instead of filling memory") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty?command=yes").ok());
  CHECK(term.expect("y\r\ny\r\n"));
  long before = rss_kib(agent.pid());
  std::this_thread::sleep_for(1500ms);  // `yes` writes hundreds of MB/s if nothing holds it back
  long after = rss_kib(agent.pid());
  INFO("agent RSS before " << before << " KiB, after " << after << " KiB");
  CHECK(after - before < 16 * 1024);
  CHECK(term.expect("y\r\ny\r\n"));  // and it still flows once the client reads
  term.abort();
  CHECK(no_children(agent.pid()));
}

TEST_CASE_METHOD(agent_fixture, "frames sent along with the upgrade request reach the terminal") {
  // A raw client: the request and a first (masked) binary frame in one write, before the 101.
  std::string keys = "echo ear''ly\r";
  std::string wire =
      "GET /pty HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  const unsigned char mask[4] = {1, 2, 3, 4};
  wire += static_cast<char>(0x82);
  wire += static_cast<char>(0x80 | keys.size());
  wire.append(reinterpret_cast<const char*>(mask), 4);
  for (std::size_t i = 0; i < keys.size(); ++i) wire += static_cast<char>(keys[i] ^ mask[i % 4]);

  asio::io_context ioc;
  asio::local::stream_protocol::socket socket(ioc);
  socket.connect(asio::local::stream_protocol::endpoint(agent.socket()));
  asio::write(socket, asio::buffer(wire));
  std::string received;
  auto deadline = steady::now() + 10s;
  while (received.find("early") == std::string::npos && steady::now() < deadline) {
    if (socket.available() == 0) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    char chunk[4096];
    std::size_t n = socket.read_some(asio::buffer(chunk));
    received.append(chunk, n);
  }
  INFO("received: " << visible(received));
  CHECK(received.rfind("HTTP/1.1 101", 0) == 0);
  CHECK(received.find("early") != std::string::npos);
}

TEST_CASE_METHOD(agent_fixture, "stopping the agent ends its terminals") {
  terminal_client term(agent.socket());
  REQUIRE(term.open("/pty").ok());
  std::string pid_file = dir / "victim.pid";
  term.type("sh -c 'echo $$ > " + pid_file + "; exec sleep 1000'\r");
  pid_t sleeper = wait_for_pid(pid_file, "sleep");
  REQUIRE(sleeper > 0);
  int status = agent.terminate(10s);
  REQUIRE(status != -1);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(wait_gone(sleeper, 5s));
}

TEST_CASE_METHOD(agent_fixture, "the upgrade answers with the first subprotocol offered, and the request id") {
  terminal_client term(agent.socket());
  wsclient::options opts;
  opts.headers.emplace_back("Sec-WebSocket-Protocol", "sandfort.v1, other");
  REQUIRE(term.open("/pty", std::move(opts)).ok());
  CHECK(term.response_header("Sec-WebSocket-Protocol") == std::optional<std::string>("sandfort.v1"));
  auto request_id = term.response_header("X-Request-Id");
  REQUIRE(request_id);
  CHECK(request_id->rfind("req-", 0) == 0);
}
