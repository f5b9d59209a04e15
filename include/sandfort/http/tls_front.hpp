#pragma once
// sandfortd terminating TLS itself: a listener that completes the TLS handshake (TLS 1.2 or
// later, certificate chain and key from PEM files) and relays the plaintext bytes to the HTTP
// server's own listener on loopback. The server and every route, streamed and upgraded ones
// included, stay as they are; the front only moves bytes. `relay_opened`/`relay_closed` say which
// client stands behind each loopback connection it makes (by its local port), so the server can
// record the real client address.
//
// reload() reads the files again (SIGHUP): new connections use the new certificate; relays
// already running keep theirs. A bad file leaves the current certificate in place.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/server.hpp"

namespace sandfort::http {

struct tls_front_options {
  std::string cert_file;  // PEM: the certificate, then any intermediates
  std::string key_file;   // PEM: its private key
  std::chrono::milliseconds handshake_timeout{10'000};
  // A piece (up to 64 KiB) written to the client that is not taken within this ends the connection.
  std::chrono::milliseconds write_timeout{60'000};
  // Open connections, and idle ones (handshake not finished) per source and in total, as
  // server_options: at a cap the oldest idle connection is closed for a new one. A relay past its
  // handshake is busy here; the HTTP server behind bounds it as the client's connection.
  std::size_t max_connections = 1024;
  std::size_t max_idle_per_source = 64;
  std::size_t max_idle = 512;
  // The source a client counts against, given its address; "" for a trusted proxy (the total only).
  std::function<std::string(const std::string& address)> idle_source;
  std::string listener_name = "tls";
  warning_log log_warning;
  std::function<void(unsigned short local_port, const std::string& client)> relay_opened;
  std::function<void(unsigned short local_port)> relay_closed;
};

class tls_front {
 public:
  tls_front(boost::asio::io_context& ioc, tls_front_options options);
  ~tls_front();
  tls_front(const tls_front&) = delete;
  tls_front& operator=(const tls_front&) = delete;

  // Reads the certificate and key; an error (unreadable, not PEM, key not the certificate's)
  // keeps what was loaded before. Call once before listen().
  result<void> reload();
  // Accepts on host_port ("0.0.0.0:443"; port 0 picks one) and relays each connection to
  // 127.0.0.1:upstream_port. Returns the bound port.
  result<unsigned short> listen(const std::string& host_port, unsigned short upstream_port);
  // Stops accepting; relays end when their connection does (the server drains those).
  void stop();
  // Subject and expiry of the certificate in use, for the log.
  std::string describe() const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace sandfort::http
