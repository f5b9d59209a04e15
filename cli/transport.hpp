#pragma once
// Connecting to sandfortd: TCP with a deadline, and TLS (https://, wss://) verified against the
// system's trust store (SSL_CERT_FILE / SSL_CERT_DIR are honoured) and the server's name. One
// stream type for both (sandfort::http::any_stream): what is built on it is compiled once.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <string>

#include "sandfort/http/any_stream.hpp"

namespace sandfort::cli {

// What to check when sandfortd does not answer.
inline constexpr const char* not_reachable_hint =
    "is sandfortd running there? Check SANDFORT_BASE_URL or run `sandfort login`";

// Throws failure naming base_url and what to do (hint; by default: check SANDFORT_BASE_URL).
void connect_tcp(boost::asio::io_context& ioc, sandfort::http::any_stream& stream, const std::string& host,
                 const std::string& port, const std::string& base_url, const char* hint = nullptr);

boost::asio::ssl::context make_tls_context();

// SNI, certificate and host name checks, then the handshake (with a deadline); from then on the
// stream's reads and writes are TLS.
void tls_handshake(boost::asio::io_context& ioc, sandfort::http::any_stream& stream, boost::asio::ssl::context& ctx,
                   const std::string& host, const std::string& base_url);

}  // namespace sandfort::cli
