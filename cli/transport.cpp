#include "transport.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <exception>

#include "failure.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/http/tls_client.hpp"

namespace sandfort::cli {
namespace net = boost::asio;
using tcp = net::ip::tcp;

void connect_tcp(net::io_context& ioc, sandfort::http::any_stream& stream, const std::string& host,
                 const std::string& port, const std::string& base_url, const char* hint) {
  if (!hint) hint = not_reachable_hint;
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) throw failure("cannot resolve " + host + ": " + ec.message() + "; " + hint);
  // A synchronous connect ignores the stream's deadline; run the async one to have it. The
  // deadline covers every address together.
  stream.expires_after(std::chrono::seconds(10));
  net::co_spawn(ioc, sandfort::http::connect_first(stream, endpoints),
                [&](std::exception_ptr failed, boost::system::error_code e) {
                  if (failed) std::rethrow_exception(failed);
                  ec = e;
                });
  ioc.run();
  ioc.restart();
  stream.expires_never();
  if (ec) throw failure("cannot connect to " + base_url + ": " + ec.message() + "; " + hint);
}

net::ssl::context make_tls_context() {
  net::ssl::context ctx(net::ssl::context::tls_client);
  ctx.set_default_verify_paths();
  ctx.set_verify_mode(net::ssl::verify_peer);
  return ctx;
}

void tls_handshake(net::io_context& ioc, sandfort::http::any_stream& stream, net::ssl::context& ctx,
                   const std::string& host, const std::string& base_url) {
  boost::system::error_code ec;
  stream.expires_after(std::chrono::seconds(15));
  sandfort::http::async_start_tls_client(stream, ctx, host, [&](boost::system::error_code e) { ec = e; });
  ioc.run();
  ioc.restart();
  stream.expires_never();
  if (ec)
    throw failure("TLS handshake with " + base_url + " failed: " + ec.message() +
                  " (a private CA can be given with SSL_CERT_FILE)");
}

}  // namespace sandfort::cli
