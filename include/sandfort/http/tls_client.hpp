#pragma once
// TLS under an any_stream, as a client (the CLI's connections to sandfortd and to identity
// providers, sandfortd's fetches of an identity provider's keys): SNI (for a name, not an IP
// literal), then the server's certificate checked against the context's trust store and the host
// name, then the handshake. A refused certificate completes with an error whose message says why
// ("certificate verify failed: hostname mismatch"). A module of its own: the static agent links
// sandfort_http and must not pull in libssl.

#include <boost/asio/async_result.hpp>
#include <boost/asio/ssl/context.hpp>
#include <string>

#include "sandfort/http/any_stream.hpp"

namespace sandfort::http {

// From its completion on (without an error), the stream's reads and writes are TLS.
void start_tls_client(any_stream& stream, boost::asio::ssl::context& context, const std::string& host,
                      any_stream::done_handler completion);

template <typename Token>
auto async_start_tls_client(any_stream& stream, boost::asio::ssl::context& context, const std::string& host,
                            Token&& token) {
  return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
      [&stream, &context, &host](auto completion) {
        start_tls_client(stream, context, host, any_stream::done_handler(std::move(completion), stream.get_executor()));
      },
      token);
}

// The server's side of the same layer (the egress proxy intercepting TLS for a host a secret is
// bound to, docs/secrets.md): the context holds the certificate and key it answers with and the
// protocol versions it accepts. From its completion on, reads and writes are TLS.
void start_tls_server(any_stream& stream, boost::asio::ssl::context& context, any_stream::done_handler completion);

template <typename Token>
auto async_start_tls_server(any_stream& stream, boost::asio::ssl::context& context, Token&& token) {
  return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
      [&stream, &context](auto completion) {
        start_tls_server(stream, context, any_stream::done_handler(std::move(completion), stream.get_executor()));
      },
      token);
}

}  // namespace sandfort::http
