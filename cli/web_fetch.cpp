#include "web_fetch.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <optional>

#include "failure.hpp"
#include "transport.hpp"

namespace sandfort::cli {
namespace http = boost::beast::http;
namespace net = boost::asio;

namespace {

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto addr = net::ip::make_address(host, ec);
  return !ec && addr.is_loopback();
}

// The request and the answer run as asynchronous operations so that the stream's deadline
// covers them: a synchronous read would wait forever on an IdP that stops answering.
web_answer exchange(net::io_context& ioc, sandfort::http::any_stream& stream,
                    const http::request<http::string_body>& req, const web_request& spec,
                    const std::string& what) {
  boost::system::error_code ec;
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(spec.body_limit);
  stream.expires_after(spec.deadline);
  http::async_write(stream, req, [&](boost::system::error_code e, std::size_t) {
    ec = e;
    if (!ec) http::async_read(stream, buffer, parser, [&](boost::system::error_code e2, std::size_t) { ec = e2; });
  });
  ioc.run();
  ioc.restart();
  stream.expires_never();
  if (ec == http::error::body_limit) throw failure(what + " (" + spec.url + ") answered more than the CLI accepts");
  if (ec == boost::beast::error::timeout) throw failure(what + " (" + spec.url + ") did not answer in time");
  if (ec) throw failure("no answer from " + what + " (" + spec.url + "): " + ec.message());
  web_answer out;
  out.status = parser.get().result_int();
  out.content_type = std::string(parser.get()[http::field::content_type]);
  out.body = std::move(parser.get().body());
  return out;
}

}  // namespace

parsed_url parse_idp_url(const std::string& url, const std::string& what) {
  parsed_url out;
  std::string_view rest = url;
  out.tls = rest.starts_with("https://");
  if (!out.tls && !rest.starts_with("http://"))
    throw failure(what + " must be an https:// URL (got \"" + url + "\")");
  rest.remove_prefix(out.tls ? 8 : 7);
  auto end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view target = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (auto hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  if (authority.find('@') != std::string_view::npos) throw failure(what + " must not carry credentials: " + url);
  auto close = authority.find(']');
  auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && (close == std::string_view::npos || colon > close)) {
    out.host = std::string(authority.substr(0, colon));
    out.port = std::string(authority.substr(colon + 1));
  } else {
    out.host = std::string(authority);
    out.port = out.tls ? "443" : "80";
  }
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  if (out.host.empty() || out.port.empty()) throw failure("cannot read " + what + " \"" + url + "\"");
  for (char c : out.port)
    if (!std::isdigit(static_cast<unsigned char>(c))) throw failure("cannot read the port of " + what + " \"" + url + "\"");
  // Tokens cross this connection: in clear text only when they never leave the machine.
  if (!out.tls && !is_loopback(out.host))
    throw failure(what + " must use https:// (plain http:// is allowed only to localhost): " + url);
  out.target = target.empty() ? "/" : std::string(target);
  if (out.target.front() == '?') out.target.insert(0, "/");
  return out;
}

web_answer web_fetch(const web_request& spec, const std::string& what) {
  parsed_url u = parse_idp_url(spec.url, what);
  http::request<http::string_body> req;
  req.method(http::string_to_verb(spec.method));
  req.target(u.target);
  req.version(11);
  req.set(http::field::host, u.host.find(':') != std::string::npos ? "[" + u.host + "]:" + u.port : u.host + ":" + u.port);
  req.set(http::field::user_agent, "sandfort-cli/0.1");
  req.set(http::field::accept, "application/json");
  if (!spec.content_type.empty()) req.set(http::field::content_type, spec.content_type);
  req.body() = spec.body;
  req.prepare_payload();

  net::io_context ioc;
  sandfort::http::any_stream conn(ioc.get_executor());
  connect_tcp(ioc, conn, u.host, u.port, spec.url, "is the identity provider's URL right and is it running?");
  std::optional<net::ssl::context> ctx;
  if (u.tls) {
    ctx.emplace(make_tls_context());
    tls_handshake(ioc, conn, *ctx, u.host, spec.url);
  }
  web_answer out = exchange(ioc, conn, req, spec, what);
  boost::system::error_code ec;
  conn.socket().shutdown(net::socket_base::shutdown_both, ec);
  return out;
}

std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  auto encode = [&](const std::string& s) {
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
        out += static_cast<char>(c);
      } else {
        out += '%';
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    }
  };
  for (const auto& [name, value] : fields) {
    if (!out.empty()) out += '&';
    encode(name);
    out += '=';
    encode(value);
  }
  return out;
}

}  // namespace sandfort::cli
