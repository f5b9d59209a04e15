#pragma once
// TLS interception for the egress proxy (docs/secrets.md), for the hosts an organization's secret
// is bound to: after the proxy answered a CONNECT with 200, the client's stream is completed as
// that host (server side, TLS 1.2 or later, a leaf minted by the organization's interception CA)
// and a TLS connection to the real upstream is opened and verified properly (the system trust
// store or a configured CA bundle, the host name, TLS 1.2 or later). Between the two the proxy
// sees requests in the clear.
//
// The upstream is dialled and verified first: a host whose certificate does not verify is never
// impersonated to the client, whose handshake then fails.
//
// The egress proxy (src/proxy/session.cpp) calls intercept_in_place on a connection whose upstream
// it dialled itself (the addresses it checked, or through egress.upstream_proxy). Both sides offer
// and accept only HTTP/1.1 (ALPN), since the proxy reads requests as HTTP/1.1.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/secrets/interception_ca.hpp"

namespace sandfort::secrets {

struct upstream_trust {
  std::string ca_file;  // PEM bundle the upstream's chain must lead to; empty: the system trust store
};

// The client context every upstream connection uses: TLS 1.2 or later, the peer verified against
// `trust`. unavailable when the trust store cannot be loaded.
result<std::shared_ptr<boost::asio::ssl::context>> make_upstream_context(const upstream_trust& trust);
// A server context answering with `leaf` (and its CA above it), TLS 1.2 or later.
result<std::shared_ptr<boost::asio::ssl::context>> make_interception_context(const certified_key& leaf,
                                                                            const interception_ca& ca);

// Both sides of an intercepted connection, in TLS. The contexts are held for as long as the
// streams (declared first: destroyed last).
struct intercepted {
  std::shared_ptr<boost::asio::ssl::context> client_context;
  std::shared_ptr<boost::asio::ssl::context> upstream_context;
  http::any_stream client;    // as `host`, to the sandbox
  http::any_stream upstream;  // to the real `host`, verified
};

struct interception_request {
  std::string host;                                       // the CONNECT's host, normalized
  std::vector<boost::asio::ip::tcp::endpoint> addresses;  // what the proxy checked: dialled in turn, nothing else
  std::chrono::milliseconds timeout{10'000};              // each step: connect, each handshake
};

// Both streams connected, in the clear: TLS with the upstream first (verified as `host`), then the
// client's handshake as `host`, whose SNI must name `host` (a client asking for another name, or
// for none, is refused: the leaf it would get names `host` only, and the request's policy was
// decided for `host`). On success both streams read and write TLS from then on; the contexts
// returned must outlive them. On failure the error says which side failed and why; the streams are
// left for the caller to close.
struct interception_contexts {
  std::shared_ptr<boost::asio::ssl::context> client_context;
  std::shared_ptr<boost::asio::ssl::context> upstream_context;
};
boost::asio::awaitable<result<interception_contexts>> intercept_in_place(
    http::any_stream& client, http::any_stream& upstream, const std::string& host, std::chrono::milliseconds timeout,
    leaf_cache& leaves, const interception_ca& ca, std::shared_ptr<boost::asio::ssl::context> upstream_context);

// `client` is the accepted stream after the CONNECT's 200, still in the clear. On failure it is
// closed and the error says which side failed and why ("upstream api.example.com: certificate
// verify failed: hostname mismatch").
boost::asio::awaitable<result<intercepted>> intercept(http::any_stream client, interception_request req,
                                                      leaf_cache& leaves, const interception_ca& ca,
                                                      std::shared_ptr<boost::asio::ssl::context> upstream_context);

}  // namespace sandfort::secrets
