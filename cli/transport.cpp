#include "transport.hpp"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <chrono>

#include "failure.hpp"

namespace sandfort::cli {
namespace net = boost::asio;
using tcp = net::ip::tcp;

void connect_tcp(net::io_context& ioc, boost::beast::tcp_stream& stream, const std::string& host,
                 const std::string& port, const std::string& base_url, const char* hint) {
  if (!hint) hint = not_reachable_hint;
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) throw failure("cannot resolve " + host + ": " + ec.message() + "; " + hint);
  // A synchronous connect ignores the stream's deadline; run the async one to have it.
  stream.expires_after(std::chrono::seconds(10));
  stream.async_connect(endpoints, [&](boost::system::error_code e, const tcp::endpoint&) { ec = e; });
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

void tls_handshake(net::io_context& ioc, tls_stream& stream, const std::string& host, const std::string& base_url) {
  if (!SSL_set_tlsext_host_name(stream.native_handle(), host.c_str()))
    throw failure("TLS setup failed for " + host);
  stream.set_verify_callback(net::ssl::host_name_verification(host));
  boost::system::error_code ec;
  stream.next_layer().expires_after(std::chrono::seconds(15));
  stream.async_handshake(net::ssl::stream_base::client, [&](boost::system::error_code e) { ec = e; });
  ioc.run();
  ioc.restart();
  stream.next_layer().expires_never();
  if (ec)
    throw failure("TLS handshake with " + base_url + " failed: " + ec.message() +
                  " (a private CA can be given with SSL_CERT_FILE)");
}

}  // namespace sandfort::cli
