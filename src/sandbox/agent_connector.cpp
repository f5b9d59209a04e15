#include "sandfort/sandbox/agent_connector.hpp"

#include "agent_answers.hpp"
#include "agent_idle.hpp"
#include "agent_socket.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <sys/mman.h>
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "sandfort/home/port.hpp"
#include "sandfort/http/client.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using nlohmann::json;

bool response_budget::try_take(std::uint64_t n) {
  if (n > capacity_ - in_use_) return false;
  in_use_ += n;
  return true;
}

bool budget_share::try_take(std::uint64_t n) {
  if (!budget_.try_take(n)) return false;
  held_ += n;
  return true;
}

namespace {

// What an agent may send before its answer's body: more is not an agent.
constexpr std::uint32_t header_limit = 16 * 1024;
// An error answer is a short JSON object; the rest of a longer one is not read.
constexpr std::size_t error_body_limit = 64 * 1024;

}  // namespace

namespace detail {

struct buffered_answer {
  unsigned status = 0;
  std::string body;
  // The answer was complete, framed by its Content-Length, read to its last byte with nothing
  // after it, and the agent keeps the connection open: it can carry another request.
  bool reusable = false;
};

struct answer_limits {
  std::chrono::milliseconds header_timeout;  // the agent answers when the command is done
  std::uint64_t body_limit;
  std::chrono::milliseconds budget_wait;
  // Bytes of the budget per byte of the answer, in halves. An exec answer takes 3 (1.5 times its
  // length): its parse gives back the text's pages as its strings grow (parse_exec_answer), its
  // encoding frees each string once written (api's exec_answer_text); measured, a 67 MB answer
  // peaks at 1.6 times its length in resident memory, 55 MB of it the answer being written.
  // Twice would refuse the largest answers a command can legitimately produce under the default
  // budget (10 MiB of random bytes per stream, binary: 67 MB from the agent).
  std::uint64_t held_halves = 2;
};

struct buffered_call {
  http::request req;
  answer_limits limits;
};

}  // namespace detail

namespace {

using detail::answer_limits;
using detail::buffered_answer;

error unavailable(std::string message) { return make_error(errc::unavailable, std::move(message)); }

// Waits for room in the budget: a full budget means other answers are being relayed and will
// be done soon; a wait that does not end is a 503, never an unbounded queue of memory.
asio::awaitable<bool> take_or_wait(budget_share& hold, std::uint64_t n, std::chrono::milliseconds patience) {
  auto until = std::chrono::steady_clock::now() + patience;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!hold.try_take(n)) {
    if (std::chrono::steady_clock::now() >= until) co_return false;
    timer.expires_after(std::chrono::milliseconds(5));
    co_await timer.async_wait(use_tuple);
  }
  co_return true;
}

// Sends req and reads the whole answer, its body charged to the budget before it is read.
// Everything about the answer is bounded: header size, body size, time.
asio::awaitable<result<buffered_answer>> request_buffered(agent_stream& stream, http::request req,
                                                          const answer_limits& limits, budget_share& hold) {
  req.prepare_payload();
  stream.expires_after(std::chrono::seconds(10));
  auto [wec, wn] = co_await bhttp::async_write(stream, req, use_tuple);
  if (wec) co_return unavailable("write to the sandbox agent failed: " + wec.message());

  beast::flat_buffer buffer = http::bounded_read_buffer();
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(header_limit);
  parser.body_limit(limits.body_limit);
  stream.expires_after(limits.header_timeout);
  auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, use_tuple);
  if (hec == beast::error::timeout) co_return unavailable("the sandbox agent did not answer in time");
  if (hec) co_return unavailable("the sandbox agent sent no valid answer: " + hec.message());

  bool ok = parser.get().result_int() < 300;
  std::uint64_t limit = ok ? limits.body_limit : error_body_limit;
  // The agent always says how long its answer is; one that does not (an endless chunked body)
  // is not the agent, and nothing of it is read.
  auto length = parser.content_length();
  if (!length) co_return unavailable("the sandbox agent's answer has no length");
  if (*length > limit) co_return unavailable("the sandbox agent's answer is larger than allowed");
  // Larger than the whole budget: no amount of waiting makes room.
  const std::uint64_t charge = *length * limits.held_halves / 2;
  if (charge > hold.capacity())
    co_return unavailable("the command's output is larger than sandfortd buffers at once; stream it instead");
  if (!co_await take_or_wait(hold, charge, limits.budget_wait))
    co_return unavailable("sandfortd is relaying too much command output right now; retry shortly");
  // The body is already produced when the header arrives: reading it takes no command time.
  stream.expires_after(std::chrono::seconds(30));
  auto [bec, bn] = co_await bhttp::async_read(stream, buffer, parser, use_tuple);
  if (bec) co_return unavailable("reading the sandbox agent's answer failed: " + bec.message());
  const bool reusable = parser.is_done() && parser.get().keep_alive() && buffer.size() == 0;
  co_return buffered_answer{parser.get().result_int(), std::move(parser.get().body()), reusable};
}

json to_agent_json(const agent_exec& call) {
  const exec_request& r = call.request;
  json j = json::object();
  if (!r.argv.empty())
    j["argv"] = r.argv;
  else
    j["command"] = r.command;
  if (!r.cwd.empty()) j["cwd"] = r.cwd;
  if (!r.env.empty()) j["env"] = r.env;
  if (r.stdin_data) j["stdin"] = *r.stdin_data;
  j["timeout_ms"] = call.timeout.count();
  j["max_output_bytes"] = call.max_output_bytes;
  if (r.binary) j["binary"] = true;
  return j;
}

}  // namespace

namespace detail {

// The agent answers errors in the API's own shape; keep its message, not its status: a 4xx is
// the caller's mistake, anything else is the agent failing.
error agent_error(unsigned status, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  std::string message = "agent answered " + std::to_string(status);
  errc code = status == 400 ? errc::invalid_argument : errc::internal;
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string())
    message = j["error"]["message"].get<std::string>().substr(0, 4096);
  return make_error(code, message);
}

// Moves a string member out of the parsed answer (no copy of what may be megabytes).
std::string take_string(json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return std::move(it->get_ref<std::string&>());
}

result<exec_result> exec_result_from(json& j) {
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer())
    return make_error(errc::internal, "agent sent a malformed exec result");
  exec_result out;
  out.exit_code = static_cast<int>(j["exit_code"].get<std::int64_t>());
  out.stdout_text = take_string(j, "stdout");
  out.stderr_text = take_string(j, "stderr");
  if (j.contains("stdout_b64")) out.stdout_b64 = take_string(j, "stdout_b64");
  if (j.contains("stderr_b64")) out.stderr_b64 = take_string(j, "stderr_b64");
  auto flag = [&](const char* key) { return j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); };
  if (j.contains("duration_ms") && j["duration_ms"].is_number_integer())
    out.duration_ms = j["duration_ms"].get<std::int64_t>();
  out.timed_out = flag("timed_out");
  out.truncated = flag("truncated");
  out.oom_killed = flag("oom_killed");
  return out;
}

namespace {

// The agent's exec answer as a flat object of its top-level members (nested values are kept as
// empty objects and arrays: exec_result_from looks no deeper). Strings are moved out of the
// parser, never copied: json::parse copies each one out of the lexer's buffer, which holds the
// largest until the end, so a 60 MB answer was held as its text, its strings and a copy of its
// largest string at once.
class top_level_reader final : public nlohmann::json_sax<json> {
 public:
  json top = json(json::value_t::discarded);

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t&) override { return value(nullptr); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    top = json(json::value_t::discarded);
    return false;
  }

 private:
  // A duplicate key: the last one wins, as in json::parse.
  bool value(json v) {
    if (depth_ == 0)
      top = std::move(v);
    else if (depth_ == 1 && top.is_object())
      top[key_] = std::move(v);
    return true;
  }
  bool open(json empty) {
    value(std::move(empty));
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  std::size_t depth_ = 0;
  std::string key_;
};

// Reads a body front to back and gives the pages it has passed back to the kernel as it goes
// (MADV_DONTNEED: nothing reads them again), so that the answer's text shrinks as its strings
// grow: parsing holds about the answer's length, not its text and its strings at once. Only
// whole pages strictly inside the body are released; the allocator's own bytes around it are not
// touched.
class releasing_reader {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  releasing_reader(const char* at, const char* end) : at_(at), end_(end) {}
  reference operator*() const { return *at_; }
  releasing_reader& operator++() {
    if (++at_ >= next_release_) release();
    return *this;
  }
  bool operator==(const releasing_reader& o) const { return at_ == o.at_; }
  bool operator!=(const releasing_reader& o) const { return at_ != o.at_; }

 private:
  static constexpr std::uintptr_t page = 4096;
  static constexpr std::uintptr_t step = 1u << 20;

  void release() {
    const auto from = (released_ ? released_ : reinterpret_cast<std::uintptr_t>(begin_) + page - 1) & ~(page - 1);
    const auto to = reinterpret_cast<std::uintptr_t>(at_) & ~(page - 1);
    if (to > from && to + page <= reinterpret_cast<std::uintptr_t>(end_)) {
      ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
      released_ = to;
    }
    next_release_ = next_stop();
  }
  const char* next_stop() const { return end_ - at_ > static_cast<std::ptrdiff_t>(step) ? at_ + step : end_; }

  const char* at_;
  const char* end_;
  const char* begin_ = at_;
  const char* next_release_ = next_stop();
  std::uintptr_t released_ = 0;
};

}  // namespace

result<exec_result> parse_exec_answer(std::string body) {
  top_level_reader reader;
  const char* text = body.data();
  if (!json::sax_parse(releasing_reader(text, text + body.size()), releasing_reader(text + body.size(), text + body.size()),
                       &reader))
    reader.top = json(json::value_t::discarded);
  std::string().swap(body);
  return exec_result_from(reader.top);
}

// {"items":[{"port":8080,"address":"0.0.0.0","family":"ipv4","pid":1,"process":"python3"}]}
result<std::vector<listening_port>> parse_port_list(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("items") || !j["items"].is_array())
    return make_error(errc::internal, "agent sent a malformed port list");
  std::vector<listening_port> out;
  for (const auto& item : j["items"]) {
    if (!item.is_object() || !item.contains("port") || !item["port"].is_number_integer())
      return make_error(errc::internal, "agent sent a malformed port list");
    const auto port = item["port"].get<std::int64_t>();
    if (port < 1 || port > 65535) continue;  // checked before narrowing: 2^32 + 80 is not port 80
    listening_port p;
    p.port = static_cast<int>(port);
    if (item.contains("address") && item["address"].is_string()) p.address = item["address"].get<std::string>();
    if (item.contains("family") && item["family"].is_string()) p.family = item["family"].get<std::string>();
    if (item.contains("pid") && item["pid"].is_number_integer()) p.pid = item["pid"].get<int>();
    if (item.contains("process") && item["process"].is_string()) p.process = item["process"].get<std::string>();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace detail

using detail::agent_error;
using detail::exec_result_from;

asio::awaitable<result<agent_stream>> open_port(agent_connector& agent, const agent_address& at, unsigned short port) {
  auto stream = co_await agent.connect(at);
  if (!stream) co_return std::move(stream).err();
  auto opened = co_await home::open_port(*stream, port, std::chrono::seconds(5));
  if (!opened) co_return std::move(opened).err();
  co_return std::move(*stream);
}

container_connector::container_connector(docker::engine& engine, answer_workers& workers, connector_options options)
    : engine_(engine),
      workers_(workers),
      options_(std::move(options)),
      idle_(std::make_unique<idle_connections>(
          idle_options{options_.idle_per_sandbox, options_.idle_total, options_.idle_timeout})),
      budget_(options_.response_budget_bytes) {}

container_connector::~container_connector() = default;

// A request is never sent again on another connection once written (an exec is not idempotent):
// a kept connection is checked before the request goes out (idle_connections::take), not after
// it failed. A sandbox that dials home has its own links (home::link_pool), taken one per call.
asio::awaitable<result<agent_stream>> container_connector::connect_kept(const agent_address& at) {
  if (!at.dials_home)
    if (auto kept = idle_->take(at.sandbox_id, at.container_id, std::chrono::steady_clock::now()))
      co_return std::move(*kept);
  co_return co_await connect(at);
}

// Called after the wait for the answer: the sandbox may have been forgotten (stopped) meanwhile,
// and then nothing of it is kept.
void container_connector::keep(const agent_address& at, agent_stream stream) {
  if (at.dials_home || !known_.count(at.sandbox_id)) {
    beast::error_code ignored;
    stream.socket().shutdown(asio::socket_base::shutdown_both, ignored);
    return;
  }
  stream.expires_never();  // a forwarded answer's deadlines were armed on it
  idle_->park(at.sandbox_id, at.container_id, std::move(stream), std::chrono::steady_clock::now());
}

asio::awaitable<result<buffered_answer>> container_connector::ask(const agent_address& at, detail::buffered_call& call,
                                                                  budget_share& hold) {
  auto stream = co_await connect_kept(at);
  if (!stream) co_return std::move(stream).err();
  auto answer = co_await request_buffered(*stream, std::move(call.req), call.limits, hold);
  if (answer && answer->reusable) {
    keep(at, std::move(*stream));
  } else if (answer) {
    beast::error_code ignored;
    stream->socket().shutdown(asio::socket_base::shutdown_both, ignored);
  }
  co_return answer;
}

asio::awaitable<result<container_identity>> container_connector::identity(const agent_address& at) {
  if (auto it = known_.find(at.sandbox_id); it != known_.end()) co_return it->second;
  if (at.container_id.empty()) co_return unavailable("sandbox " + at.sandbox_id + " has no container");
  auto info = co_await engine_.inspect_container(at.container_id);
  if (!info) co_return unavailable("cannot find the container of " + at.sandbox_id + ": " + info.err().message);
  if (!info->running || info->pid <= 0) co_return unavailable("the container of " + at.sandbox_id + " is not running");
  auto who = identify_container(info->pid, info->id);
  if (!who) co_return std::move(who).err();
  known_[at.sandbox_id] = *who;
  co_return *who;
}

result<void> container_connector::prepare(const agent_address& at) {
  if (!at.dials_home) return {};
  if (!doors_) return make_error(errc::unavailable, "gVisor sandboxes are not served by this daemon");
  auto dir = doors_->open(at.sandbox_id);
  if (!dir) return std::move(dir).err();
  return {};
}

void container_connector::forget(const std::string& sandbox_id) {
  known_.erase(sandbox_id);
  idle_->forget(sandbox_id);
  if (doors_) doors_->close(sandbox_id);
}

asio::awaitable<result<agent_stream>> container_connector::connect(const agent_address& at) {
  if (at.dials_home) {  // its links are the only way in: the door they came through proved them
    if (!pool_) co_return unavailable("gVisor sandboxes are not served by this daemon");
    co_return co_await pool_->take(at.sandbox_id, options_.home_wait);
  }
  for (int attempt = 0;; ++attempt) {
    auto who = co_await identity(at);
    if (!who) co_return std::move(who).err();
    auto fd = connect_in_container(*who, options_.socket_in_container);
    if (fd) {
      agent_stream stream(co_await asio::this_coro::executor);
      boost::system::error_code ec;
      stream.socket().assign(asio::local::stream_protocol(), *fd, ec);
      if (ec) co_return unavailable("cannot use the agent connection: " + ec.message());
      co_return stream;
    }
    if (fd.err().code == errc::permission_denied) {
      spdlog::warn("attack: sandbox {}: {}; the agent is treated as dead", at.sandbox_id, fd.err().message);
      co_return unavailable("the sandbox agent is not reachable");
    }
    // The container may have been restarted (a new init pid): learn it again, once.
    known_.erase(at.sandbox_id);
    idle_->forget(at.sandbox_id);
    if (attempt == 1) co_return std::move(fd).err();
  }
}

asio::awaitable<result<void>> container_connector::health(const agent_address& at, std::chrono::milliseconds timeout) {
  budget_share hold(budget_);
  detail::buffered_call call{http::make_request(http::verb::get, "/health"),
                             {timeout, error_body_limit, std::chrono::milliseconds(0)}};
  auto answer = co_await ask(at, call, hold);
  if (!answer) co_return std::move(answer).err();
  if (answer->status != 200) co_return agent_error(answer->status, answer->body);
  co_return ok_t{};
}

asio::awaitable<result<void>> container_connector::claim(const agent_address& at,
                                                         const std::map<std::string, std::string>& env,
                                                         const std::string& workdir) {
  json body = {{"env", env}, {"workdir", workdir}};
  budget_share hold(budget_);
  detail::buffered_call request{http::make_request(http::verb::post, "/claim", &body),
                                {std::chrono::seconds(10), error_body_limit, std::chrono::milliseconds(0)}};
  auto answer = co_await ask(at, request, hold);
  if (!answer) co_return std::move(answer).err();
  if (answer->status != 200) co_return agent_error(answer->status, answer->body);
  co_return ok_t{};
}

asio::awaitable<result<exec_result>> container_connector::exec(const agent_address& at, const agent_exec& call) {
  json body = to_agent_json(call);
  // Worst case per stream: every byte escaped as \u00XX (6x) plus its base64 (4/3x).
  detail::buffered_call request{http::make_request(http::verb::post, "/process/exec", &body),
                                {call.timeout + std::chrono::seconds(10), 16 * call.max_output_bytes + (1u << 20),
                                 options_.budget_wait, 3}};
  // Held until the caller has written the result out (exec_result::memory).
  auto memory = std::make_shared<budget_share>(budget_);
  auto answer = co_await ask(at, request, *memory);
  if (!answer) co_return std::move(answer).err();
  if (answer->status != 200) co_return agent_error(answer->status, answer->body);
  // Tens of megabytes take hundreds of milliseconds to parse: not on the I/O thread.
  const bool large = answer->body.size() >= answer_workers::inline_bytes;
  auto parse = [body = std::move(answer->body)]() mutable { return detail::parse_exec_answer(std::move(body)); };
  // No co_await inside ?: (GCC 12 miscompiles those).
  std::optional<result<exec_result>> r;
  if (large)
    r.emplace(co_await workers_.run(std::move(parse)));
  else
    r.emplace(parse());
  if (*r) (*r)->memory = std::move(memory);
  co_return std::move(*r);
}

asio::awaitable<result<std::vector<listening_port>>> container_connector::ports(const agent_address& at) {
  budget_share hold(budget_);
  detail::buffered_call request{http::make_request(http::verb::get, "/ports"),
                                {std::chrono::seconds(10), 4u << 20, options_.budget_wait}};
  auto answer = co_await ask(at, request, hold);
  if (!answer) co_return std::move(answer).err();
  if (answer->status != 200) co_return agent_error(answer->status, answer->body);
  if (answer->body.size() < answer_workers::inline_bytes) co_return detail::parse_port_list(answer->body);
  // Named: GCC 12 mishandles temporaries inside co_await expressions.
  auto parse = [body = std::move(answer->body)] { return detail::parse_port_list(body); };
  co_return co_await workers_.run(std::move(parse));
}

asio::awaitable<result<void>> container_connector::exec_stream(const agent_address& at, const agent_exec& call,
                                                              byte_sink& sink) {
  auto connected = co_await connect(at);
  if (!connected) co_return std::move(connected).err();
  agent_stream& stream = *connected;

  json body = to_agent_json(call);
  auto req = http::make_request(http::verb::post, "/process/exec", &body);
  req.set(bhttp::field::accept, "text/event-stream");
  stream.expires_after(std::chrono::seconds(10));
  auto [wec, wn] = co_await bhttp::async_write(stream, req, use_tuple);
  if (wec) co_return unavailable("write to the sandbox agent failed: " + wec.message());

  // If the reader leaves, closing our end makes the agent kill the command.
  sink.abandon = [&stream] {
    beast::error_code ignored;
    stream.socket().close(ignored);
  };
  struct forget {
    byte_sink& s;
    ~forget() { s.abandon = nullptr; }
  } on_exit{sink};

  beast::flat_buffer buffer = http::bounded_read_buffer();
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(header_limit);
  parser.body_limit(boost::none);
  auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, use_tuple);
  if (hec) co_return unavailable("the sandbox agent did not answer: " + hec.message());
  std::vector<char> chunk(64 * 1024);
  std::string error_body;
  bool ok = parser.get().result_int() == 200;
  // The command's own timeout ends the stream; this only catches an agent that went silent.
  stream.expires_after(call.timeout + std::chrono::seconds(10));
  beast::error_code broke;
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    auto [ec, n] = co_await bhttp::async_read_some(stream, buffer, parser, use_tuple);
    if (ec && ec != bhttp::error::need_buffer) {
      broke = ec;
      break;
    }
    std::string_view got(chunk.data(), chunk.size() - parser.get().body().size);
    if (!ok) {
      error_body.append(got.substr(0, error_body_limit - std::min(error_body_limit, error_body.size())));
      if (error_body.size() >= error_body_limit) break;
      continue;
    }
    // Closing our end makes the agent kill the command: nobody is reading any more.
    if (!got.empty() && !co_await sink.write(got)) co_return ok_t{};
  }
  if (!ok) co_return agent_error(parser.get().result_int(), error_body);
  if (broke) {  // before the agent's last event: the caller must not take it for the end
    spdlog::warn("sandbox {}: the agent's event stream broke: {}", at.sandbox_id, broke.message());
    co_return unavailable("the sandbox's agent stopped answering during the command: " + broke.message());
  }
  co_return ok_t{};
}

}  // namespace sandfort::sandbox
