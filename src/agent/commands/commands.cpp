#include "commands/commands.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include "process/async.hpp"
#include "process/child.hpp"
#include "sandfort/core/ids.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::agent::commands {
namespace {

namespace asio = boost::asio;
using asio::posix::stream_descriptor;
constexpr std::size_t read_chunk = 64 * 1024;

limits configured;

}  // namespace

void configure(const limits& l) { configured = l; }
const limits& current_limits() { return configured; }

std::string dropped_marker(std::uint64_t n) { return "[sandfort: " + std::to_string(n) + " bytes dropped]\n"; }

void log_ring::append(std::string_view bytes) {
  if (bytes.size() >= cap_) {
    begin_ += bytes_.size() + (bytes.size() - cap_);
    bytes_.assign(bytes.end() - static_cast<std::ptrdiff_t>(cap_), bytes.end());
    return;
  }
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  if (bytes_.size() > cap_) {
    std::size_t drop = bytes_.size() - cap_;
    bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(drop));
    begin_ += drop;
  }
}

std::string log_ring::read_from(std::uint64_t offset) const {
  std::uint64_t skip = offset > begin_ ? std::min<std::uint64_t>(offset - begin_, bytes_.size()) : 0;
  return std::string(bytes_.begin() + static_cast<std::ptrdiff_t>(skip), bytes_.end());
}

std::string log_ring::text() const {
  std::string out = begin_ > 0 ? dropped_marker(begin_) : std::string();
  out.append(bytes_.begin(), bytes_.end());
  return out;
}

struct registry::command {
  command(const asio::any_io_executor& ex, std::size_t cap)
      : out_log(cap), err_log(cap), out_stream(ex), err_stream(ex), exit_fd(ex), retention(ex) {}
  command(const command&) = delete;
  command& operator=(const command&) = delete;
  // Only with the io_context going away while it runs: nothing may outlive the agent.
  ~command() {
    if (reaped || pid <= 0) return;
    kill_session(pid);
    agent::reap(pid);
  }

  command_info info() const {
    command_info i;
    i.id = id;
    i.pid = pid;
    i.running = !exited;
    if (exited) {
      i.exit_code = exit_code;
      i.ended_at = ended_at;
    }
    i.command = text;
    i.started_at = started_at;
    return i;
  }

  void close_stdin() {
    if (!stdin_pipe) return;
    boost::system::error_code ignored;
    stdin_pipe->close(ignored);
    stdin_pipe.reset();
  }

  std::string id;
  std::string text;
  pid_t pid = -1;
  time_point started_at;
  time_point ended_at;
  bool exited = false;
  bool reaped = false;
  int exit_code = 0;
  log_ring out_log;
  log_ring err_log;
  stream_descriptor out_stream;
  stream_descriptor err_stream;
  stream_descriptor exit_fd;
  std::shared_ptr<stream_descriptor> stdin_pipe;  // null once closed
  fifo_mutex stdin_order;
  notifier changed;  // new output or the exit
  asio::steady_timer retention;
};

namespace {

using command_t = registry::command;

void drain_ready(stream_descriptor& s, log_ring& log) {
  int pending = 0;
  if (!s.is_open() || ::ioctl(s.native_handle(), FIONREAD, &pending) != 0) return;
  std::vector<char> buf(read_chunk);
  while (pending > 0) {
    ssize_t n = ::read(s.native_handle(), buf.data(), std::min(buf.size(), static_cast<std::size_t>(pending)));
    if (n <= 0) break;
    log.append(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    pending -= static_cast<int>(n);
  }
}

// Until EOF: after the command exits, a process it left behind may still write.
asio::awaitable<void> read_log(std::shared_ptr<command_t> c, stream_descriptor& s, log_ring& log) {
  std::vector<char> buf(read_chunk);
  while (true) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), use_tuple);
    if (n > 0) {
      log.append(std::string_view(buf.data(), n));
      c->changed.notify_all();
    }
    if (ec) break;
  }
}

asio::awaitable<void> watch_exit(registry& reg, std::shared_ptr<command_t> c) {
  auto [ec] = co_await c->exit_fd.async_wait(stream_descriptor::wait_read, use_tuple);
  if (ec) co_return;  // the io_context is going away: ~command kills and reaps
  int code = agent::reap(c->pid);
  c->reaped = true;
  c->exit_code = code < 0 ? 255 : code;
  c->ended_at = std::chrono::system_clock::now();
  // What it wrote before exiting is in the pipes now: it belongs to the log before `exit`.
  drain_ready(c->out_stream, c->out_log);
  drain_ready(c->err_stream, c->err_log);
  c->exited = true;
  c->close_stdin();
  c->changed.notify_all();

  c->retention.expires_after(configured.retention);
  auto [tec] = co_await c->retention.async_wait(use_tuple);
  if (tec) co_return;
  reg.forget(c->id);
}

}  // namespace

registry::registry(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}
registry::~registry() { commands_.clear(); }
void registry::shutdown() { commands_.clear(); }

registry& registry::of(const asio::any_io_executor& ex) {
  return asio::use_service<registry>(asio::query(ex, asio::execution::context));
}

std::shared_ptr<command_t> registry::find(const std::string& command_id) const {
  for (const auto& c : commands_)
    if (c->id == command_id) return c;
  return nullptr;
}

void registry::forget(const std::string& command_id) {
  auto it = std::find_if(commands_.begin(), commands_.end(), [&](const auto& c) { return c->id == command_id; });
  if (it == commands_.end()) return;
  auto c = *it;
  commands_.erase(it);
  boost::system::error_code ignored;
  c->retention.cancel();
  c->out_stream.close(ignored);
  c->err_stream.close(ignored);
  c->close_stdin();
}

result<command_info> registry::start(const asio::any_io_executor& ex, const start_request& req) {
  if (req.command.empty()) return make_error(errc::invalid_argument, "command must not be empty");
  exec_request shape;
  shape.argv = {"/bin/sh", "-c", req.command};
  shape.cwd = req.cwd;
  shape.env = req.env;
  if (auto valid = validate(shape); !valid) return std::move(valid).err();

  if (commands_.size() >= configured.max_commands) {
    auto oldest_exited = std::find_if(commands_.begin(), commands_.end(), [](const auto& c) { return c->exited; });
    if (oldest_exited == commands_.end())
      return make_error(errc::conflict, "too many running commands (" + std::to_string(configured.max_commands) + ")");
    forget((*oldest_exited)->id);
  }

  auto in = make_pipe();
  if (!in) return std::move(in).err();
  auto out = make_pipe();
  if (!out) return std::move(out).err();
  auto err = make_pipe();
  if (!err) return std::move(err).err();
  spawn_spec spec{"/bin/sh", shape.argv, merged_environment(req.env), req.cwd,
                  {{in->read.get(), 0}, {out->write.get(), 1}, {err->write.get(), 2}}};
  pid_t pid = -1;
  if (int e = spawn_process(spec, pid); e != 0)
    return make_error(errc::unavailable, "cannot start /bin/sh: " + errno_text(e));

  auto c = std::make_shared<command_t>(ex, configured.log_cap);
  c->pid = pid;  // from here on, ~command kills and reaps it on any failure
  c->id = new_id("cmd-");
  c->text = req.command;
  c->started_at = std::chrono::system_clock::now();
  auto notifier = exit_notifier(pid);
  if (!notifier) return std::move(notifier).err();
  c->exit_fd.assign(notifier->release());
  c->out_stream.assign(out->read.release());
  c->out_stream.non_blocking(true);
  c->err_stream.assign(err->read.release());
  c->err_stream.non_blocking(true);
  c->stdin_pipe = std::make_shared<stream_descriptor>(ex, in->write.release());
  c->stdin_pipe->non_blocking(true);

  asio::co_spawn(ex, read_log(c, c->out_stream, c->out_log), asio::detached);
  asio::co_spawn(ex, read_log(c, c->err_stream, c->err_log), asio::detached);
  asio::co_spawn(ex, watch_exit(*this, c), asio::detached);
  commands_.push_back(c);
  return c->info();
}

std::vector<command_info> registry::list() const {
  std::vector<command_info> out;
  for (const auto& c : commands_) out.push_back(c->info());
  return out;
}

result<command_info> registry::get(const std::string& command_id) const {
  auto c = find(command_id);
  if (!c) return make_error(errc::not_found, "command " + command_id + " not found");
  return c->info();
}

result<log_snapshot> registry::logs(const std::string& command_id) const {
  auto c = find(command_id);
  if (!c) return make_error(errc::not_found, "command " + command_id + " not found");
  return log_snapshot{c->out_log.text(), c->err_log.text(), c->out_log.begin() + c->err_log.begin()};
}

asio::awaitable<result<void>> registry::write_stdin(const std::string& command_id, const std::string& bytes, bool eof) {
  auto c = find(command_id);
  if (!c) co_return make_error(errc::not_found, "command " + command_id + " not found");
  co_await c->stdin_order.lock();
  fifo_lock held(c->stdin_order);
  if (!c->stdin_pipe) co_return make_error(errc::conflict, "the stdin of " + command_id + " is closed");
  auto pipe = c->stdin_pipe;
  if (!bytes.empty()) {
    auto [ec, n] = co_await asio::async_write(*pipe, asio::buffer(bytes), use_tuple);
    if (ec) {
      c->close_stdin();
      co_return make_error(errc::conflict, "the stdin of " + command_id + " is closed (" + ec.message() + ")");
    }
  }
  if (eof) c->close_stdin();
  co_return ok_t{};
}

result<void> registry::signal(const std::string& command_id, int signo) {
  auto c = find(command_id);
  if (!c) return make_error(errc::not_found, "command " + command_id + " not found");
  if (c->exited) return make_error(errc::conflict, "command " + command_id + " has exited");
  // Its own session and group (pid == pgid), unreaped: the number cannot have been reused.
  if (::kill(-c->pid, signo) != 0 && ::kill(c->pid, signo) != 0)
    return make_error(errc::conflict, "cannot signal " + command_id + ": " + errno_text(errno));
  return {};
}

namespace {

// Sends the part of one stream that the follower has not seen, up to a whole character
// unless the stream is complete. False when the receiver left.
asio::awaitable<bool> catch_up(output_sink& sink, output_stream which, const log_ring& log, std::uint64_t& seen,
                               bool complete) {
  if (seen < log.begin()) {
    std::string marker = dropped_marker(log.begin() - seen);
    seen = log.begin();
    if (!co_await sink.write(which, marker)) co_return false;
  }
  std::string fresh = log.read_from(seen);
  std::size_t n = complete ? fresh.size() : complete_utf8_prefix(fresh);
  if (n == 0) co_return true;
  seen += n;
  std::string_view part(fresh.data(), n);
  co_return co_await sink.write(which, part);
}

}  // namespace

asio::awaitable<result<std::optional<int>>> registry::follow(const std::string& command_id, output_sink& sink) {
  auto c = find(command_id);
  if (!c) co_return make_error(errc::not_found, "command " + command_id + " not found");
  std::uint64_t out_seen = 0;
  std::uint64_t err_seen = 0;
  while (true) {
    std::uint64_t version = c->changed.version();
    bool done = c->exited;
    if (!co_await catch_up(sink, output_stream::out, c->out_log, out_seen, done)) co_return std::nullopt;
    if (!co_await catch_up(sink, output_stream::err, c->err_log, err_seen, done)) co_return std::nullopt;
    if (done) co_return std::optional<int>(c->exit_code);
    using namespace asio::experimental::awaitable_operators;
    auto woke = co_await (c->changed.wait(version) || sink.wait_gone());
    if (woke.index() == 1) co_return std::nullopt;
  }
}

}  // namespace sandfort::agent::commands
