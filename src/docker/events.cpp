// Docker's event stream: GET /events held open, one JSON object per line, read in pieces.
// Nothing the engine sends is held whole: the body is read through Beast's parser into a fixed
// buffer and split into lines of bounded length, so a stream that runs for weeks costs one
// buffer, and a line over the limit is dropped as it arrives (and reported as a lost event).
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/events.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <limits>

#include "engine_errors.hpp"
#include "json_access.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/http/client.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "unix_engine.hpp"
#include "url.hpp"

namespace sandfort::docker {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using json = nlohmann::json;
using unix_socket = asio::local::stream_protocol;

// Our own events are a few hundred bytes; the image's labels ride along in the attributes, so
// leave room for generous ones. Longer lines are dropped and reported as lost.
constexpr std::size_t event_line_limit = 64u << 10;
constexpr std::uint32_t event_header_limit = 16u << 10;
// An error answer (400/500) is a short JSON message: read no more than this of it.
constexpr std::size_t error_body_limit = 16u << 10;
constexpr std::size_t read_piece = 8u << 10;

using detail::member;
using detail::string_of;

std::int64_t integer_of(const json& j) { return j.is_number_integer() ? j.get<std::int64_t>() : 0; }

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool carries_label(const std::map<std::string, std::string>& attributes, const std::string& filter) {
  auto eq = filter.find('=');
  auto it = attributes.find(filter.substr(0, eq));
  if (it == attributes.end()) return false;
  return eq == std::string::npos || it->second == filter.substr(eq + 1);
}

}  // namespace

result<engine_event> parse_event(std::string_view line) {
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(errc::invalid_argument, "an event line is not a JSON object");
  engine_event ev;
  ev.type = string_of(member(j, "Type"));
  ev.action = string_of(member(j, "Action"));
  const json& actor = member(j, "Actor");
  ev.actor_id = string_of(member(actor, "ID"));
  // Engines before API 1.22 sent only status/id: they are below what we support, but a line of
  // that shape is still read as the container event it is.
  if (ev.type.empty() && ev.action.empty() && member(j, "status").is_string()) {
    ev.type = "container";
    ev.action = string_of(member(j, "status"));
    ev.actor_id = string_of(member(j, "id"));
  }
  if (ev.type.empty() || ev.action.empty()) return make_error(errc::invalid_argument, "an event without Type or Action");
  const json& attributes = member(actor, "Attributes");
  if (attributes.is_object())
    for (const auto& [k, v] : attributes.items())
      if (v.is_string()) ev.attributes.emplace(k, v.get<std::string>());
  auto attribute = [&](const char* key) {
    auto it = ev.attributes.find(key);
    return it == ev.attributes.end() ? std::string{} : it->second;
  };
  if (ev.type == "container") {
    ev.container_id = ev.actor_id;
  } else if (ev.type == "network") {
    ev.container_id = attribute("container");
    ev.network = attribute("name");
  }
  if (auto code = attribute("exitCode"); !code.empty()) {
    int value = 0;
    auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), value);
    if (ec == std::errc() && end == code.data() + code.size()) ev.exit_code = value;
  }
  ev.time = integer_of(member(j, "time"));
  ev.time_nano = integer_of(member(j, "timeNano"));
  // Seconds past 2262 do not fit in nanoseconds (signed overflow): such a time is left unknown.
  constexpr std::int64_t ns_per_s = 1'000'000'000;
  if (ev.time_nano == 0 && ev.time > 0 && ev.time <= std::numeric_limits<std::int64_t>::max() / ns_per_s)
    ev.time_nano = ev.time * ns_per_s;
  return ev;
}

json event_filters(const event_subscription& sub) {
  json types = json::array();
  std::vector<std::string> actions;
  if (!sub.container_actions.empty()) types.push_back("container");
  if (!sub.network_actions.empty()) types.push_back("network");
  for (const auto* list : {&sub.container_actions, &sub.network_actions})
    for (const auto& a : *list)
      if (!contains(actions, a)) actions.push_back(a);
  json filters = {{"type", types}, {"event", actions}};
  // Docker ANDs the keys over every type, and network events carry no labels: a label filter
  // would drop them. It is sent only when no network events are asked for.
  if (sub.network_actions.empty() && !sub.container_labels.empty()) filters["label"] = sub.container_labels;
  if (sub.container_actions.empty() && !sub.networks.empty()) filters["network"] = sub.networks;
  return filters;
}

bool subscription_matches(const event_subscription& sub, const engine_event& ev) {
  if (ev.lost) return true;
  if (ev.type == "container") {
    if (!contains(sub.container_actions, ev.action)) return false;
    return std::all_of(sub.container_labels.begin(), sub.container_labels.end(),
                       [&](const std::string& f) { return carries_label(ev.attributes, f); });
  }
  if (ev.type == "network") {
    if (!contains(sub.network_actions, ev.action)) return false;
    return sub.networks.empty() || contains(sub.networks, ev.network);
  }
  return false;
}

std::string since_parameter(std::int64_t unix_nano) {
  auto seconds = unix_nano / 1'000'000'000;
  auto nanos = std::to_string(unix_nano % 1'000'000'000);
  return std::to_string(seconds) + "." + std::string(9 - nanos.size(), '0') + nanos;
}

std::vector<line_splitter::line> line_splitter::feed(std::string_view bytes) {
  std::vector<line> out;
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    auto piece = bytes.substr(0, nl);
    bytes = nl == std::string_view::npos ? std::string_view{} : bytes.substr(nl + 1);
    if (!overflowing_ && partial_.size() + piece.size() > limit_) {
      overflowing_ = true;
      partial_.clear();
      partial_.shrink_to_fit();
    }
    if (!overflowing_) partial_.append(piece);
    if (nl == std::string_view::npos) break;
    if (overflowing_) {
      out.push_back(line{{}, true});
    } else if (!partial_.empty() && partial_ != "\r") {
      out.push_back(line{std::move(partial_), false});
    }
    partial_.clear();
    overflowing_ = false;
  }
  return out;
}

task<void> unix_engine::follow_events(event_subscription sub, event_handler on_event, std::function<void()> on_open) {
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto filters = event_filters(sub).dump(-1, ' ', false, json::error_handler_t::replace);
  std::string since = sub.since_nano > 0 ? since_parameter(sub.since_nano) : std::string();
  std::string target = "/v" + *v + "/events" +
                       (since.empty() ? detail::query_string({{"filters", filters}})
                                      : detail::query_string({{"since", since}, {"filters", filters}}));
  const std::string& path = options_.socket_path;

  http::any_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(options_.timeout);
  auto [cec] = co_await stream.async_connect(unix_socket::endpoint(path), use_tuple);
  if (cec) co_return detail::transport_error(path, make_error(errc::unavailable, cec.message()));
  auto req = http::make_request(http::verb::get, target);
  auto [wec, wn] = co_await bhttp::async_write(stream, req, use_tuple);
  if (wec) co_return detail::transport_error(path, make_error(errc::unavailable, wec.message()));

  beast::flat_buffer buffer(event_header_limit + read_piece);
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(event_header_limit);
  parser.body_limit(boost::none);  // a stream: bounded per line below, not in total
  auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, use_tuple);
  if (hec) co_return detail::transport_error(path, make_error(errc::unavailable, "no answer to GET /events: " + hec.message()));

  char piece[read_piece];
  auto read_piece_of_body = [&]() -> asio::awaitable<std::pair<beast::error_code, std::string_view>> {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof piece;
    auto [ec, n] = co_await bhttp::async_read_some(stream, buffer, parser, use_tuple);
    if (ec == bhttp::error::need_buffer) ec = {};
    co_return std::pair{ec, std::string_view(piece, sizeof piece - parser.get().body().size)};
  };

  if (parser.get().result_int() != 200) {
    std::string body;
    stream.expires_after(options_.timeout);
    while (!parser.is_done() && body.size() < error_body_limit) {
      auto [ec, bytes] = co_await read_piece_of_body();
      body.append(bytes.substr(0, error_body_limit - body.size()));
      if (ec) break;
    }
    co_return detail::status_error(parser.get().result_int(), body, "follow Docker's events");
  }

  // Events may not come for hours: no deadline from here on, only the end of the stream or
  // the caller's cancellation.
  stream.expires_never();
  if (on_open) on_open();
  line_splitter lines(event_line_limit);
  for (;;) {
    auto [ec, bytes] = co_await read_piece_of_body();
    for (auto& l : lines.feed(bytes)) {
      engine_event ev;
      if (auto parsed = l.lost ? result<engine_event>(make_error(errc::invalid_argument, "")) : parse_event(l.text))
        ev = std::move(parsed).value();
      else
        ev.lost = true;  // too long or not an event: what it said is unknown
      if (subscription_matches(sub, ev)) co_await on_event(ev);
    }
    if (ec == asio::error::operation_aborted)
      co_return make_error(errc::unavailable, "stopped following Docker's events");
    if (ec) co_return detail::transport_error(path, make_error(errc::unavailable, "the event stream broke: " + ec.message()));
    if (parser.is_done()) co_return make_error(errc::unavailable, "Docker ended its event stream");
  }
}

}  // namespace sandfort::docker
