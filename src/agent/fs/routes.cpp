#include "fs/routes.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "fs/entry.hpp"
#include "fs/operations.hpp"
#include "fs/tar.hpp"
#include "fs/transfer.hpp"
#include "process/sse.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "watch/watcher.hpp"

// Every co_await below takes named locals only: GCC 12 destroys temporaries of a co_await
// full-expression twice in some coroutines.

namespace sandfort::agent {
namespace {

namespace asio = boost::asio;
namespace bhttp = http::bhttp;
using nlohmann::json;
using http::exchange;

constexpr std::size_t chunk_size = 64 * 1024;
// A client that stops sending or reading for this long is gone.
constexpr std::chrono::seconds inactivity_limit{60};
// The rest of a refused request body is read (and dropped) up to this much, so the answer
// reaches the client and the connection stays usable; beyond it the connection is closed.
constexpr std::size_t drain_limit = 1 << 20;

// ---- JSON and query parsing -------------------------------------------------------------

json to_json(const fs::entry& e) {
  json j = {{"name", e.name},
            {"path", e.path},
            {"type", fs::to_string(e.type)},
            {"size", e.size},
            {"mode", fs::format_mode(e.mode)},
            {"mtime", fs::format_time_ms(e.mtime_ms)}};
  if (e.target) j["target"] = *e.target;
  return j;
}

result<std::string> query_path(const std::map<std::string, std::string>& query) {
  auto it = query.find("path");
  if (it == query.end()) return make_error(errc::invalid_argument, "query parameter path is required");
  return fs::check_path(it->second);
}

result<bool> query_bool(const std::map<std::string, std::string>& query, const std::string& key) {
  auto it = query.find(key);
  if (it == query.end()) return false;
  if (it->second == "true" || it->second == "1" || it->second.empty()) return true;
  if (it->second == "false" || it->second == "0") return false;
  return make_error(errc::invalid_argument, key + " must be true or false, not '" + it->second + "'");
}

result<json> parse_object(const std::string& body, std::initializer_list<std::string_view> known) {
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return make_error(errc::invalid_argument, "request body is not valid JSON");
  if (!j.is_object()) return make_error(errc::invalid_argument, "request body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end())
      return make_error(errc::invalid_argument, "unknown field " + key);
  }
  return j;
}

result<std::string> path_field(const json& j, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end()) return make_error(errc::invalid_argument, key + " is required");
  if (!it->is_string()) return make_error(errc::invalid_argument, key + " must be a string");
  auto checked = fs::check_path(it->get<std::string>());
  if (!checked) return make_error(errc::invalid_argument, key + ": " + checked.err().message);
  return checked;
}

result<bool> bool_field(const json& j, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean()) return make_error(errc::invalid_argument, key + " must be a boolean");
  return it->get<bool>();
}

// "0750" (octal text) or 488 (the number itself).
result<std::optional<unsigned>> mode_field(const json& j, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<unsigned>{};
  if (it->is_string()) {
    auto parsed = fs::parse_mode(it->get<std::string>(), key);
    if (!parsed) return parsed.err();
    return std::optional<unsigned>{*parsed};
  }
  if (it->is_number_unsigned() && it->get<std::uint64_t>() <= 07777)
    return std::optional<unsigned>{it->get<unsigned>()};
  return make_error(errc::invalid_argument, key + " must be an octal string like \"0755\"");
}

// PUT /files' mode=: set-uid, set-gid and sticky bits only with keep_setid=true, so that a
// privileged executable is never made by accident.
result<unsigned> upload_mode(const std::map<std::string, std::string>& query) {
  auto keep_setid = query_bool(query, "keep_setid");
  if (!keep_setid) return keep_setid.err();
  auto it = query.find("mode");
  if (it == query.end()) return 0644u;
  auto parsed = fs::parse_mode(it->second, "mode");
  if (!parsed) return parsed.err();
  if ((*parsed & 07000) && !*keep_setid)
    return make_error(errc::invalid_argument,
                      "mode " + it->second + " sets set-uid, set-gid or sticky bits; add keep_setid=true to mean it");
  return *parsed;
}

// ---- whole-answer routes ----------------------------------------------------------------

asio::awaitable<http::response> list_files(http::context& ctx) {
  auto path = query_path(ctx.query);
  if (!path) co_return http::error_response(path.err(), ctx.request_id);
  auto items = fs::list_dir(*path);
  if (!items) co_return http::error_response(items.err(), ctx.request_id);
  json out = json::array();
  for (const auto& e : *items) out.push_back(to_json(e));
  co_return http::json_response(200, {{"items", std::move(out)}});
}

asio::awaitable<http::response> stat_path(http::context& ctx) {
  auto path = query_path(ctx.query);
  if (!path) co_return http::error_response(path.err(), ctx.request_id);
  auto e = fs::stat_entry(*path);
  if (!e) co_return http::error_response(e.err(), ctx.request_id);
  co_return http::json_response(200, to_json(*e));
}

result<fs::mkdir_request> parse_mkdir(const std::string& body) {
  auto j = parse_object(body, {"path", "parents", "mode"});
  if (!j) return j.err();
  fs::mkdir_request req;
  auto path = path_field(*j, "path");
  if (!path) return path.err();
  req.path = std::move(*path);
  auto parents = bool_field(*j, "parents");
  if (!parents) return parents.err();
  req.parents = *parents;
  auto mode = mode_field(*j, "mode");
  if (!mode) return mode.err();
  req.mode = *mode;
  return req;
}

asio::awaitable<http::response> make_directory(http::context& ctx) {
  auto req = parse_mkdir(ctx.req.body());
  if (!req) co_return http::error_response(req.err(), ctx.request_id);
  auto made = fs::make_dir(*req);
  if (!made) co_return http::error_response(made.err(), ctx.request_id);
  co_return http::json_response(made->created ? 201 : 200, to_json(made->dir));
}

result<fs::move_request> parse_move(const std::string& body) {
  auto j = parse_object(body, {"from", "to", "overwrite"});
  if (!j) return j.err();
  fs::move_request req;
  auto from = path_field(*j, "from");
  if (!from) return from.err();
  auto to = path_field(*j, "to");
  if (!to) return to.err();
  auto overwrite = bool_field(*j, "overwrite");
  if (!overwrite) return overwrite.err();
  req.from = std::move(*from);
  req.to = std::move(*to);
  req.overwrite = *overwrite;
  return req;
}

asio::awaitable<http::response> move_path(http::context& ctx) {
  auto req = parse_move(ctx.req.body());
  if (!req) co_return http::error_response(req.err(), ctx.request_id);
  auto moved = fs::move(*req);
  if (!moved) co_return http::error_response(moved.err(), ctx.request_id);
  co_return http::json_response(200, to_json(*moved));
}

asio::awaitable<http::response> delete_path(http::context& ctx) {
  auto path = query_path(ctx.query);
  if (!path) co_return http::error_response(path.err(), ctx.request_id);
  auto recursive = query_bool(ctx.query, "recursive");
  if (!recursive) co_return http::error_response(recursive.err(), ctx.request_id);
  auto removed = fs::remove(*path, *recursive);
  if (!removed) co_return http::error_response(removed.err(), ctx.request_id);
  co_return http::empty_response(204);
}

// ---- streamed routes --------------------------------------------------------------------

struct piece {
  boost::system::error_code ec;
  std::size_t size = 0;
};

// Beast reads at most what the connection's buffer has room for, and after a small header
// that is 512 bytes: give it room for whole pieces while a body streams in, and hand the
// memory back afterwards so that an idle kept-alive connection stays small.
class body_room {
 public:
  explicit body_room(boost::beast::flat_buffer& buffer) : buffer_(buffer) { buffer_.reserve(chunk_size); }
  ~body_room() { buffer_.shrink_to_fit(); }
  body_room(const body_room&) = delete;
  body_room& operator=(const body_room&) = delete;

 private:
  boost::beast::flat_buffer& buffer_;
};

// The next bytes of the request body into data[0..capacity).
asio::awaitable<piece> read_piece(exchange& ex, char* data, std::size_t capacity) {
  ex.parser.get().body().data = data;
  ex.parser.get().body().size = capacity;
  ex.stream.expires_after(inactivity_limit);
  auto [ec, n] = co_await bhttp::async_read_some(ex.stream, ex.buffer, ex.parser, use_tuple);
  ex.stream.expires_never();
  if (ec == bhttp::error::need_buffer) ec = {};
  std::size_t got = capacity - ex.parser.get().body().size;
  ex.parser.get().body().data = nullptr;
  ex.parser.get().body().size = 0;
  co_return piece{ec, got};
}

// Reads and drops the rest of the body, up to `limit` bytes; true when it all arrived.
asio::awaitable<bool> drain_body(exchange& ex, std::size_t limit) {
  body_room room(ex.buffer);
  auto buf = std::make_unique<char[]>(chunk_size);
  std::size_t total = 0;
  while (!ex.parser.is_done()) {
    piece p = co_await read_piece(ex, buf.get(), chunk_size);
    if (p.ec) co_return false;
    total += p.size;
    if (total > limit) co_return false;
  }
  co_return true;
}

asio::awaitable<bool> answer(exchange& ex, http::response res) {
  res.set(bhttp::field::server, "sandfort-agent");
  co_return co_await http::respond(ex, std::move(res));
}

// An error answer for a request whose body may not have been read yet.
asio::awaitable<bool> fail(exchange& ex, const error& e) {
  // Not drained entirely: respond() then marks the connection as closing.
  if (!ex.parser.is_done()) co_await drain_body(ex, drain_limit);
  http::response res = http::error_response(e, ex.request_id);
  co_return co_await answer(ex, std::move(res));
}

// A body that could not be read: a malformed one gets an answer, a vanished client none.
asio::awaitable<bool> body_failed(exchange& ex, boost::system::error_code ec) {
  if (ec == asio::error::eof || ec == bhttp::error::partial_message || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe || ec == boost::beast::error::timeout || ec == asio::error::operation_aborted)
    co_return false;
  error e = make_error(errc::invalid_argument, "malformed request body: " + ec.message());
  http::response res = http::error_response(e, ex.request_id);
  co_await answer(ex, std::move(res));
  co_return false;
}

// PUT /files?path=&mode=&keep_setid=: the body, streamed into a temporary file renamed into place.
asio::awaitable<bool> upload(exchange& ex) {
  auto path = query_path(ex.query);
  if (!path) {
    error e = path.err();
    co_return co_await fail(ex, e);
  }
  auto mode = upload_mode(ex.query);
  if (!mode) {
    error e = mode.err();
    co_return co_await fail(ex, e);
  }
  auto file = fs::atomic_file::create(*path, *mode);
  if (!file) {
    error e = file.err();
    co_return co_await fail(ex, e);
  }
  body_room room(ex.buffer);
  auto buf = std::make_unique<char[]>(chunk_size);
  while (!ex.parser.is_done()) {
    piece p = co_await read_piece(ex, buf.get(), chunk_size);
    if (p.ec) co_return co_await body_failed(ex, p.ec);  // the temporary file goes with `file`
    if (p.size == 0) continue;
    if (auto written = file->write(buf.get(), p.size); !written) {
      error e = written.err();
      co_return co_await fail(ex, e);
    }
  }
  if (auto committed = file->commit(); !committed) {
    error e = committed.err();
    co_return co_await fail(ex, e);
  }
  json body = {{"path", *path}, {"size", file->size()}, {"mode", fs::format_mode(file->mode())}};
  http::response res = http::json_response(201, body);
  co_return co_await answer(ex, std::move(res));
}

// Writes `size` bytes of fd after a header announcing them. False when the connection
// cannot be reused (the client left, or the file shrank under us).
asio::awaitable<bool> send_file(exchange& ex, int fd, std::uint64_t size, const std::string& shown) {
  bhttp::response<bhttp::empty_body> head{bhttp::status::ok, 11};
  head.set(bhttp::field::server, "sandfort-agent");
  head.set(bhttp::field::content_type, "application/octet-stream");
  head.set("X-Request-Id", ex.request_id);
  head.content_length(size);
  head.keep_alive(ex.parser.get().keep_alive() && ex.parser.is_done());
  bhttp::response_serializer<bhttp::empty_body> sr{head};
  ex.stream.expires_after(inactivity_limit);
  auto [hec, hn] = co_await bhttp::async_write_header(ex.stream, sr, use_tuple);
  if (hec) co_return false;
  auto buf = std::make_unique<char[]>(chunk_size);
  std::uint64_t left = size;
  while (left > 0) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, chunk_size));
    auto n = fs::read_some(fd, buf.get(), want, shown);
    if (!n || *n == 0) co_return false;  // the client sees a short body: it must not trust it
    ex.stream.expires_after(inactivity_limit);
    auto [wec, wn] = co_await asio::async_write(ex.stream, asio::buffer(buf.get(), *n), use_tuple);
    if (wec) co_return false;
    left -= *n;
  }
  ex.stream.expires_never();
  co_return head.keep_alive();
}

// GET /files?path=: the file's bytes with Content-Length, read from disk in pieces.
asio::awaitable<bool> download(exchange& ex) {
  auto path = query_path(ex.query);
  if (!path) {
    error e = path.err();
    co_return co_await fail(ex, e);
  }
  auto file = fs::open_for_read(*path);
  if (!file) {
    error e = file.err();
    co_return co_await fail(ex, e);
  }
  if (!ex.parser.is_done() && !co_await drain_body(ex, drain_limit)) co_return false;
  int fd = file->fd.get();
  std::uint64_t size = file->size;
  co_return co_await send_file(ex, fd, size, *path);
}

// PUT /files/archive?path=&keep_setid=: a tar body extracted into that directory as it arrives.
asio::awaitable<bool> extract(exchange& ex) {
  auto path = query_path(ex.query);
  if (!path) {
    error e = path.err();
    co_return co_await fail(ex, e);
  }
  auto keep_setid = query_bool(ex.query, "keep_setid");
  if (!keep_setid) {
    error e = keep_setid.err();
    co_return co_await fail(ex, e);
  }
  auto extractor = fs::tar_extractor::open(*path, fs::extract_options{*keep_setid});
  if (!extractor) {
    error e = extractor.err();
    co_return co_await fail(ex, e);
  }
  body_room room(ex.buffer);
  auto buf = std::make_unique<char[]>(chunk_size);
  while (!ex.parser.is_done()) {
    piece p = co_await read_piece(ex, buf.get(), chunk_size);
    if (p.ec) co_return co_await body_failed(ex, p.ec);
    if (auto fed = extractor->feed(buf.get(), p.size); !fed) {
      error e = fed.err();
      co_return co_await fail(ex, e);
    }
  }
  auto summary = extractor->finish();
  if (!summary) {
    error e = summary.err();
    co_return co_await fail(ex, e);
  }
  json body = {{"path", *path},
               {"entries", summary->entries},
               {"skipped", summary->skipped},
               {"skipped_count", summary->skipped_count}};
  http::response res = http::json_response(200, body);
  co_return co_await answer(ex, std::move(res));
}

// GET /files/archive?path=: a tar of that directory's contents (or of one file), chunked.
asio::awaitable<bool> archive(exchange& ex) {
  auto path = query_path(ex.query);
  if (!path) {
    error e = path.err();
    co_return co_await fail(ex, e);
  }
  auto writer = fs::tar_writer::open(*path);
  if (!writer) {
    error e = writer.err();
    co_return co_await fail(ex, e);
  }
  if (!ex.parser.is_done() && !co_await drain_body(ex, drain_limit)) co_return false;
  http::chunked_writer out(ex);
  std::string content_type = "application/x-tar";
  ex.stream.expires_after(inactivity_limit);
  if (!co_await out.start(200, content_type)) co_return false;
  auto buf = std::make_unique<char[]>(chunk_size);
  while (true) {
    auto n = writer->read(buf.get(), chunk_size);
    // A failure halfway: no final chunk, so the client sees an incomplete transfer.
    if (!n) co_return false;
    if (*n == 0) break;
    std::string_view bytes(buf.get(), *n);
    ex.stream.expires_after(inactivity_limit);
    if (!co_await out.write(bytes)) co_return false;
  }
  bool keep = co_await out.finish();
  ex.stream.expires_never();
  co_return keep;
}


// ---- directory watching -----------------------------------------------------------------

// A quiet watch says it lives this often: proxies keep the stream open, and a relay whose
// client left finds out by writing it (the watch then ends here too).
constexpr std::chrono::seconds watch_keep_alive{15};

json watch_event_json(const watch::event& e, const std::string& root, bool include_entry) {
  json j = {{"type", std::string(watch::to_string(e.type))}};
  switch (e.type) {
    case watch::event_type::overflow:
      j["dropped"] = e.dropped;
      j["message"] = e.message;
      return j;
    case watch::event_type::end:
      j["message"] = e.message;
      return j;
    case watch::event_type::limit:
      j["name"] = e.name;
      j["message"] = e.message;
      return j;
    default:
      break;
  }
  j["name"] = e.name;
  j["is_dir"] = e.is_dir;
  if (include_entry && e.type != watch::event_type::remove && e.type != watch::event_type::rename) {
    // As it is when the event is sent: it may have changed again, or be gone (then no entry).
    if (auto found = fs::stat_entry(fs::join_path(root, e.name))) j["entry"] = to_json(*found);
  }
  return j;
}

// Sends events as they come, a keep-alive when there are none; returns once the watch ended
// (its `end` event sent) or the client left.
asio::awaitable<void> relay_watch(watch::watcher& w, sse_writer& events, bool include_entry) {
  asio::steady_timer quiet(co_await asio::this_coro::executor);
  using namespace asio::experimental::awaitable_operators;
  for (;;) {
    quiet.expires_after(watch_keep_alive);
    auto woke = co_await (w.next() || quiet.async_wait(use_tuple));
    if (woke.index() == 1) {
      if (!co_await events.keep_alive()) co_return;
      continue;
    }
    auto batch = std::get<0>(std::move(woke));
    if (batch.empty()) co_return;
    for (const auto& e : batch) {
      json data = watch_event_json(e, w.path(), include_entry);
      if (!co_await events.send(watch::to_string(e.type), data)) co_return;
    }
  }
}

struct watch_request {
  std::string path;
  bool recursive = false;
  bool include_entry = false;
};

result<watch_request> parse_watch(const std::map<std::string, std::string>& query) {
  auto path = query_path(query);
  if (!path) return path.err();
  auto recursive = query_bool(query, "recursive");
  if (!recursive) return recursive.err();
  auto include_entry = query_bool(query, "include_entry");
  if (!include_entry) return include_entry.err();
  return watch_request{std::move(*path), *recursive, *include_entry};
}

// GET /files/watch?path=&recursive=&include_entry=: server-sent events as the directory
// changes — `start` once the watch is in place, then create/write/remove/rename/chmod (and
// overflow, limit), and `end` when the directory itself goes away. Ends when the client leaves.
asio::awaitable<bool> watch_dir(exchange& ex) {
  auto req = parse_watch(ex.query);
  if (!req) {
    error e = req.err();
    co_return co_await fail(ex, e);
  }
  if (!ex.parser.is_done() && !co_await drain_body(ex, drain_limit)) co_return false;
  auto executor = ex.stream.get_executor();
  auto opened = watch::hub::of(executor).open(executor, req->path, req->recursive);
  if (!opened) {
    error e = opened.err();
    co_return co_await fail(ex, e);
  }
  std::unique_ptr<watch::watcher> w = std::move(*opened);
  sse_writer events(ex);
  json start = {{"type", "start"}, {"path", req->path}, {"recursive", req->recursive}, {"directories", w->directories()}};
  if (!co_await events.send("start", start)) co_return false;
  using namespace asio::experimental::awaitable_operators;
  co_await (relay_watch(*w, events, req->include_entry) || events.wait_gone());
  w.reset();  // the watch ends before the answer does
  if (events.failed()) co_return false;
  co_return co_await events.finish();
}

}  // namespace

namespace fs {

std::vector<http::route> routes() {
  return {
      {http::verb::get, "/files/list", &list_files},
      {http::verb::get, "/files/stat", &stat_path},
      {http::verb::post, "/files/mkdir", &make_directory},
      {http::verb::post, "/files/move", &move_path},
      {http::verb::delete_, "/files", &delete_path},
  };
}

std::vector<http::stream_route> stream_routes() {
  std::vector<http::stream_route> all(5);
  // Member by member: GCC 12 crashes on aggregate initialization of stream_route that leaves
  // `when` to its default member initializer.
  auto set = [](http::stream_route& r, http::verb method, const char* pattern,
                asio::awaitable<bool> (*fn)(exchange&)) {
    r.method = method;
    r.pattern = pattern;
    r.fn = fn;
  };
  set(all[0], http::verb::put, "/files", &upload);
  set(all[1], http::verb::get, "/files", &download);
  set(all[2], http::verb::put, "/files/archive", &extract);
  set(all[3], http::verb::get, "/files/archive", &archive);
  set(all[4], http::verb::get, "/files/watch", &watch_dir);
  return all;
}

}  // namespace fs

}  // namespace sandfort::agent
