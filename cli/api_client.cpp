#include "api_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <optional>

#include "config.hpp"
#include "failure.hpp"
#include "transport.hpp"

namespace sandfort::cli {
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

api_client::api_client(std::string base_url, std::shared_ptr<credentials> creds)
    : base_url_(std::move(base_url)), creds_(std::move(creds)) {
  std::string_view rest = base_url_;
  tls_ = rest.starts_with("https://");
  if (!tls_ && !rest.starts_with("http://"))
    throw failure("the base URL must start with http:// or https:// (got \"" + base_url_ +
                  "\"); run `sandfort login` or fix SANDFORT_BASE_URL");
  rest.remove_prefix(tls_ ? 8 : 7);
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  prefix_ = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    host_ = std::string(authority.substr(0, colon));
    port_ = std::string(authority.substr(colon + 1));
  } else {
    host_ = std::string(authority);
    port_ = tls_ ? "443" : "80";
  }
  if (host_.size() > 2 && host_.front() == '[' && host_.back() == ']') host_ = host_.substr(1, host_.size() - 2);
  if (host_.empty() || port_.empty()) throw failure("cannot read the base URL \"" + base_url_ + "\"");
}

namespace {

// Sends the request: a string body at once, or a body_source in pieces (Content-Length when
// its size is known, chunked otherwise), so an upload never has to fit in memory.
void write_request(sandfort::http::any_stream& stream, const request_spec& spec, const http::request_header<>& head,
                   const std::string& base_url) {
  boost::system::error_code ec;
  auto broke = [&] { throw failure("sending the request to " + base_url + " failed: " + ec.message()); };
  if (!spec.body_source) {
    http::request<http::string_body> req{head};
    req.body() = spec.body;
    req.prepare_payload();
    http::write(stream, req, ec);
    if (ec) broke();
    return;
  }
  http::request<http::buffer_body> req{head};
  if (spec.body_size)
    req.content_length(*spec.body_size);
  else
    req.chunked(true);
  http::request_serializer<http::buffer_body> serializer{req};
  http::write_header(stream, serializer, ec);
  if (ec) broke();
  std::string piece(64 * 1024, '\0');
  for (;;) {
    std::size_t n = spec.body_source(piece.data(), piece.size());
    req.body().data = n > 0 ? piece.data() : nullptr;
    req.body().size = n;
    req.body().more = n > 0;
    http::write(stream, serializer, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) broke();
    if (n == 0) break;
  }
}

response exchange(sandfort::http::any_stream& stream, const request_spec& spec, const http::request_header<>& head,
                  const std::string& base_url, const char* hint) {
  write_request(stream, spec, head, base_url);
  boost::system::error_code ec;
  boost::beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  http::read_header(stream, buffer, parser, ec);
  if (ec) throw failure("no answer from " + base_url + ": " + ec.message() + "; " + (hint ? hint : not_reachable_hint));

  response out;
  out.status = parser.get().result_int();
  out.request_id = std::string(parser.get()["X-Request-Id"]);
  out.next_cursor = std::string(parser.get()["X-Next-Cursor"]);
  out.retry_after = std::string(parser.get()["Retry-After"]);
  bool stream_body = out.status / 100 == 2 && spec.on_chunk;
  std::string piece(64 * 1024, '\0');
  while (!parser.is_done()) {
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) throw failure("the connection to " + base_url + " broke: " + ec.message());
    std::size_t n = piece.size() - parser.get().body().size;
    if (n == 0) continue;
    if (stream_body)
      spec.on_chunk(std::string_view(piece.data(), n));
    else
      out.body.append(piece.data(), n);
  }
  return out;
}

// What frees room under the quota the message names ("quota exceeded: <quota> — …"): stopped
// sandboxes keep their place and their disk (docs/guardrails.md, "Quotas"), so only for CPUs and
// memory does a stop help.
std::string quota_hint(const std::string& message) {
  const std::string lead = "quota exceeded: ";
  std::string quota;
  if (message.starts_with(lead)) quota = message.substr(lead.size(), message.find(' ', lead.size()) - lead.size());
  std::string what;
  if (quota == "sandboxes" || quota == "disk_mb")
    what = "stopped sandboxes count too, so stopping one frees nothing: delete sandboxes the organization no longer "
           "needs (`sandfort sandbox ls`, `sandfort sandbox rm ID`)";
  else if (quota == "cpus" || quota == "memory_mb")
    what = "only running (and paused) sandboxes count: stop or delete ones no longer needed (`sandfort sandbox ls`, "
           "`sandfort sandbox stop ID`), or ask for less (--cpus, --memory)";
  else if (quota == "volumes")
    what = "delete volumes no longer needed (`sandfort volume ls`, `sandfort volume rm NAME`)";
  else if (quota == "snapshots")
    what = "delete snapshots no longer needed (`sandfort snapshot ls`, `sandfort snapshot rm NAME`)";
  else if (quota == "api_keys")
    what = "revoked and expired keys do not count: revoke keys no longer needed (`sandfort key revoke ID`)";
  else
    what = "free what the quota counts";
  return what + "; `sandfort org limits` shows the quotas and their use";
}

}  // namespace

response api_client::send(const request_spec& spec) {
  std::string token = creds_->bearer();
  response r = send_once(spec, token);
  if (r.status == 401 && !spec.body_source && creds_->renew(token)) r = send_once(spec, creds_->bearer());
  return r;
}

response api_client::send_once(const request_spec& spec, const std::string& token) {
  http::request_header<> req;
  req.method(spec.method);
  req.target(prefix_ + spec.target);
  req.version(11);
  req.set(http::field::host, host_ + ":" + port_);
  req.set(http::field::user_agent, "sandfort-cli/0.1");
  req.set(http::field::authorization, "Bearer " + token);
  req.set(http::field::accept, spec.accept);
  if (!spec.content_type.empty()) req.set(http::field::content_type, spec.content_type);

  net::io_context ioc;
  sandfort::http::any_stream conn(ioc.get_executor());
  connect_tcp(ioc, conn, host_, port_, base_url_, unreachable_hint_);
  std::optional<net::ssl::context> ctx;
  if (tls_) {
    ctx.emplace(make_tls_context());
    tls_handshake(ioc, conn, *ctx, host_, base_url_);
  }
  response out = exchange(conn, spec, req, base_url_, unreachable_hint_);
  boost::system::error_code ec;
  conn.socket().shutdown(net::socket_base::shutdown_both, ec);
  return out;
}

nlohmann::json api_client::call(verb method, const std::string& target, const nlohmann::json* body) {
  request_spec spec;
  spec.method = method;
  spec.target = target;
  if (body) {
    spec.body = body->dump();
    spec.content_type = "application/json";
  }
  response r = send(spec);
  if (r.status / 100 != 2) throw_api_error(r);
  if (r.body.empty()) return nullptr;
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded()) throw failure("the API answered something that is not JSON (status " + std::to_string(r.status) + ")");
  return j;
}

void throw_api_error(const response& r) {
  std::string message, code, request_id = r.request_id;
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    message = e.value("message", "");
    code = e.value("code", "");
    if (e.contains("request_id") && e["request_id"].is_string()) request_id = e["request_id"].get<std::string>();
  } else {
    message = r.body.empty() ? "HTTP " + std::to_string(r.status) : r.body;
  }
  std::string text = "error: " + message + " (";
  text += code.empty() ? "HTTP " + std::to_string(r.status) : code;
  if (!request_id.empty()) text += ", request " + request_id;
  text += ")";
  if (r.status == 401) text += "\nhint: the credentials were refused; run `sandfort login` or set SANDFORT_API_KEY";
  if (code == "rate_limited")
    text += "\nhint: too many requests with these credentials; retry" +
            (r.retry_after.empty() ? std::string(" later") : " in " + r.retry_after + " s");
  if (code == "quota_exceeded") text += "\nhint: " + quota_hint(message);
  if (code == "image_not_allowed") text += "\nhint: `sandfort org limits` shows the images the organization may use";
  if (code == "runtime_not_allowed")
    text += "\nhint: `sandfort org limits` shows the runtimes the organization may use; a create that names none "
            "gets one of them";
  if (code == "insufficient_storage")
    text += "\nhint: the daemon's state disk is full and nothing was changed; reads, deletes and stops still work "
            "(`sandfort sandbox rm` frees space); retry once space returns";
  if (code == "host_full")
    text += "\nhint: the host's memory is taken by running sandboxes (every organization's); stop or delete "
            "sandboxes no longer needed, ask for less memory (--memory), or ask the operator";
  throw failure(text);
}

api_client connect_api() {
  settings s = require_settings();
  return api_client(s.base_url, credentials_for(s));
}

std::string url_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

void sse_parser::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::size_t start = 0;
  for (;;) {
    auto nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view l(pending_.data() + start, nl - start);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    line(l);
    start = nl + 1;
  }
  pending_.erase(0, start);
}

void sse_parser::line(std::string_view l) {
  if (l.empty()) {
    if (!event_.empty() || !data_.empty()) on_event_(event_.empty() ? "message" : event_, data_);
    event_.clear();
    data_.clear();
    return;
  }
  auto field = [&](std::string_view name) -> std::optional<std::string_view> {
    if (!l.starts_with(name) || l.size() <= name.size() || l[name.size()] != ':') return std::nullopt;
    std::string_view v = l.substr(name.size() + 1);
    if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return v;
  };
  if (auto v = field("event")) {
    event_ = std::string(*v);
  } else if (auto d = field("data")) {
    if (!data_.empty()) data_ += '\n';
    data_ += *d;
  }
}

}  // namespace sandfort::cli
