#pragma once
// Connecting to sandfortd: TCP with a deadline, and TLS (https://, wss://) verified against the
// system's trust store (SSL_CERT_FILE / SSL_CERT_DIR are honoured) and the server's name.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <string>

namespace sandfort::cli {

using tls_stream = boost::asio::ssl::stream<boost::beast::tcp_stream>;

// What to check when sandfortd does not answer.
inline constexpr const char* not_reachable_hint =
    "is sandfortd running there? Check SANDFORT_BASE_URL or run `sandfort login`";

// Throws failure naming base_url and what to do (hint; by default: check SANDFORT_BASE_URL).
void connect_tcp(boost::asio::io_context& ioc, boost::beast::tcp_stream& stream, const std::string& host,
                 const std::string& port, const std::string& base_url, const char* hint = nullptr);

boost::asio::ssl::context make_tls_context();

// SNI, certificate and host name checks, then the handshake (with a deadline).
void tls_handshake(boost::asio::io_context& ioc, tls_stream& stream, const std::string& host,
                   const std::string& base_url);

}  // namespace sandfort::cli
