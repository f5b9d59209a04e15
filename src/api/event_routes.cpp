// GET /v1/events: an organization's life-cycle events as server-sent events (docs/events.md). A
// view of the audit chain: first the stored events after the client's cursor, page by page, then
// live ones as the chain grows, woken by the event hub; `id:` is the chain's seq.
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <set>

#include "routes.hpp"
#include "sandfort/api/event_hub.hpp"
#include "sandfort/audit/lifecycle_events.hpp"

namespace sandfort::api {

namespace asio = boost::asio;

namespace {

constexpr std::size_t events_page = 200;                     // audit rows read from SQLite at once
constexpr auto events_heartbeat = std::chrono::seconds(15);  // a comment line while nothing happens
// A reader that takes no byte of an event (or heartbeat) for this long is closed: the daemon holds
// at most one page and the write in progress for it, the kernel its socket buffer. It resumes
// with Last-Event-ID.
constexpr auto events_write_timeout = std::chrono::seconds(30);
constexpr std::int64_t largest_cursor = (std::int64_t{1} << 53) - 1;

struct events_request {
  std::string org_id;
  std::int64_t after = 0;
  std::set<std::string> types;  // empty: all
};

result<std::int64_t> parse_cursor(std::string_view text, const char* name) {
  const auto bad = [&] {
    return make_error(errc::invalid_argument,
                      std::string(name) + " must be the id of an event (a non-negative integer), not '" +
                          std::string(text.substr(0, 64)) + "'");
  };
  if (text.empty() || text.size() > 16 || text.find_first_not_of("0123456789") != std::string_view::npos) return bad();
  const std::int64_t v = std::stoll(std::string(text));
  if (v > largest_cursor) return bad();
  return v;
}

result<events_request> parse_events_request(dependencies& deps, const http::exchange& ex, const auth::principal& p) {
  events_request r;
  auto named = ex.query.find("org");
  auto org = resolve_target_org(deps, p, named == ex.query.end() ? std::string() : named->second,
                                deleted_orgs::allowed);
  if (!org) return std::move(org).err();
  r.org_id = std::move(*org);
  // The header (an EventSource reconnecting sends it) wins over ?after= (a first request's); an
  // empty one is no cursor, as for an EventSource that has seen no id yet.
  const auto& header = ex.parser.get();
  if (auto h = header.find("Last-Event-ID"); h != header.end() && !h->value().empty()) {
    auto v = parse_cursor(std::string_view(h->value().data(), h->value().size()), "Last-Event-ID");
    if (!v) return std::move(v).err();
    r.after = *v;
  } else if (auto q = ex.query.find("after"); q != ex.query.end()) {
    auto v = parse_cursor(q->second, "after");
    if (!v) return std::move(v).err();
    r.after = *v;
  }
  if (auto q = ex.query.find("types"); q != ex.query.end()) {
    std::string_view list = q->second;
    while (!list.empty()) {
      auto comma = list.find(',');
      std::string_view type = list.substr(0, comma);
      if (!audit::is_lifecycle_event_type(type))
        return make_error(errc::invalid_argument, "types: '" + std::string(type.substr(0, 64)) +
                                                      "' is not an event type (docs/events.md lists them)");
      r.types.emplace(type);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
    if (r.types.empty()) return make_error(errc::invalid_argument, "types must name at least one event type");
  }
  return r;
}

std::string sse_frame(const audit::lifecycle_event& e) {
  std::string out = "id: " + std::to_string(e.seq) + "\nevent: " + e.type + "\ndata: ";
  out += e.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // one line: no \n in JSON text
  out += "\n\n";
  return out;
}

struct event_stream {
  dependencies& deps;
  http::exchange& ex;
  events_request req;
  asio::steady_timer& bell;
  bool gone = false;      // the client closed (or the write failed)
  bool finished = false;  // serve() returned
};

asio::awaitable<bool> send(event_stream& s, http::chunked_writer& out, std::string_view bytes) {
  s.ex.stream.expires_after(events_write_timeout);
  bool wrote = co_await out.write(bytes);
  s.ex.stream.expires_never();
  if (!wrote) s.gone = true;
  co_return wrote;
}

// Stored events after the cursor, then live ones; returns when the client is gone or an error
// ends the stream (the client reconnects with Last-Event-ID).
asio::awaitable<void> serve(event_stream& s, http::chunked_writer& out) {
  std::int64_t cursor = s.req.after;
  while (!s.gone) {
    store::audit_filter page;
    page.after_seq = cursor;
    page.limit = events_page;
    page.lifecycle_only = true;
    // The life-cycle index from the cursor on: a page reads at most events_page rows, a request
    // at most the life-cycle rows after its cursor, whatever the chain holds before it and
    // however many exec or file rows lie between.
    // Every seq up to `appended` is committed, so a page read after this that comes back short
    // has seen every life-cycle row up to it: the cursor moves past the other rows too.
    const std::int64_t appended = s.deps.events.latest(s.req.org_id);
    auto rows = s.deps.audit.events(s.req.org_id, page);
    if (!rows) break;
    for (const auto& row : *rows) {
      cursor = row.seq;
      auto e = audit::lifecycle_event_of(row);
      if (!e || (!s.req.types.empty() && !s.req.types.contains(e->type))) continue;
      const std::string frame = sse_frame(*e);
      const bool sent = co_await send(s, out, frame);
      if (!sent) break;
    }
    if (s.gone) break;
    if (rows->size() == events_page) {
      // More stored rows: let the I/O thread serve others between pages.
      auto executor = co_await asio::this_coro::executor;
      co_await asio::post(executor, asio::use_awaitable);
      continue;
    }
    cursor = std::max(cursor, appended);
    // Caught up. Nothing can be appended between the read above and this check without this
    // coroutine having been suspended, and the hub remembers the highest seq it was told.
    if (s.deps.events.latest(s.req.org_id) > cursor) continue;
    s.bell.expires_after(events_heartbeat);
    auto [ec] = co_await s.bell.async_wait(asio::as_tuple(asio::use_awaitable));
    if (s.gone || s.deps.events.closing()) break;
    if (!ec) {
      const std::string_view heartbeat = ": heartbeat\n\n";
      const bool sent = co_await send(s, out, heartbeat);
      if (!sent) break;
    }
  }
  s.finished = true;
  boost::beast::error_code ignored;
  s.ex.stream.socket().cancel(ignored);  // ends watch_reader
}

// A client that goes away while the stream waits is noticed at once, not at the next heartbeat.
asio::awaitable<void> watch_reader(event_stream& s) {
  if (s.finished) co_return;
  auto space = s.ex.buffer.prepare(4096);
  auto [ec, n] = co_await s.ex.stream.socket().async_read_some(space, asio::as_tuple(asio::use_awaitable));
  if (!ec) {
    s.ex.buffer.commit(n);  // the client spoke (not a disconnect): keep its bytes, stop watching
    co_return;
  }
  if (!s.finished) {
    s.gone = true;
    s.bell.cancel();
  }
}

asio::awaitable<bool> stream_events(dependencies& deps, http::exchange& ex, stream_call& answer) {
  auto req = parse_events_request(deps, ex, answer.who);
  if (!req) {
    answer.answered(req.err());
    co_return co_await http::respond_error(ex, req.err());
  }
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer bell(executor);
  auto place = deps.events.subscribe(req->org_id, ex.remote, bell);
  if (!place) {
    answer.answered(place.err());
    co_return co_await http::respond_error(ex, place.err());
  }
  http::chunked_writer out(ex);
  const std::string content_type = "text/event-stream";
  bool started = co_await out.start(200, content_type);
  answer.answered(200);
  if (!started) co_return false;
  event_stream s{deps, ex, std::move(*req), bell};
  // Tells EventSource clients how soon to reconnect after a drop.
  const std::string_view hello = "retry: 1000\n\n";
  const bool greeted = co_await send(s, out, hello);
  if (!greeted) co_return false;
  using namespace asio::experimental::awaitable_operators;
  co_await (serve(s, out) && watch_reader(s));
  co_return false;  // the connection ends with the stream
}

}  // namespace

std::vector<api_route> event_routes() {
  return {
      // Any role reads: the events say what happened to the organization's sandboxes, never a secret.
      {http::verb::get, "/v1/events", auth::permission::read, route_kind::streamed, stream_events},
  };
}

}  // namespace sandfort::api
