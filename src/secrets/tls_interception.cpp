#include "sandfort/secrets/tls_interception.hpp"

#include <openssl/ssl.h>

#include <optional>

#include "sandfort/http/tls_client.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::secrets {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;

namespace {

error upstream_error(const std::string& host, const std::string& what) {
  return make_error(errc::unavailable, "upstream " + host + ": " + what);
}

constexpr unsigned char http11_alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// The server's ALPN choice: HTTP/1.1 when the client offers it, else no protocol (which a client
// takes as HTTP/1.1); never h2, which the proxy does not read.
int select_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
                  void*) {
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, http11_alpn, sizeof http11_alpn, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// The client's SNI must name the host the CONNECT named (arg: that host, while the handshake runs).
int check_server_name(SSL* ssl, int* alert, void* arg) {
  if (!arg) return SSL_TLSEXT_ERR_ALERT_FATAL;
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  std::string given = name ? name : "";
  for (auto& c : given)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (!given.empty() && given.back() == '.') given.pop_back();
  if (given.empty() || given != *static_cast<const std::string*>(arg)) {
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

result<std::shared_ptr<ssl::context>> make_upstream_context(const upstream_trust& trust) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_verify_mode(ssl::verify_peer);
  SSL_CTX_set_alpn_protos(ctx->native_handle(), http11_alpn, sizeof http11_alpn);
  error_code ec;
  if (trust.ca_file.empty())
    ctx->set_default_verify_paths(ec);
  else
    ctx->load_verify_file(trust.ca_file, ec);
  if (ec) {
    const std::string source = trust.ca_file.empty() ? "the system trust store" : "the CA file " + trust.ca_file;
    return make_error(errc::unavailable, "cannot load " + source + ": " + ec.message());
  }
  return ctx;
}

result<std::shared_ptr<ssl::context>> make_interception_context(const certified_key& leaf, const interception_ca& ca) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_alpn_select_cb(native, select_http11, nullptr);
  if (SSL_CTX_use_certificate(native, leaf.certificate.get()) != 1 ||
      SSL_CTX_use_PrivateKey(native, leaf.key.get()) != 1 || SSL_CTX_check_private_key(native) != 1)
    return make_error(errc::internal, "interception: the leaf certificate and key do not load");
  // The chain a client is sent: the leaf, then the CA it trusts (which it may match by name).
  X509* ca_cert = ca.certificate();
  if (X509_up_ref(ca_cert) != 1 || SSL_CTX_add0_chain_cert(native, ca_cert) != 1) {
    X509_free(ca_cert);
    return make_error(errc::internal, "interception: the CA certificate does not load");
  }
  return ctx;
}

asio::awaitable<result<interception_contexts>> intercept_in_place(http::any_stream& client,
                                                                 http::any_stream& upstream, const std::string& host,
                                                                 std::chrono::milliseconds timeout,
                                                                 leaf_cache& leaves, const interception_ca& ca,
                                                                 std::shared_ptr<ssl::context> upstream_context) {
  auto leaf = leaves.leaf_for(host, std::chrono::system_clock::now());
  if (!leaf) co_return std::move(leaf).err();
  auto client_context = make_interception_context(*leaf, ca);
  if (!client_context) co_return std::move(client_context).err();
  // The upstream first: only a host that proves itself is answered for.
  upstream.expires_after(timeout);
  auto [upstream_ec] = co_await http::async_start_tls_client(upstream, *upstream_context, host, use_tuple);
  upstream.expires_never();
  if (upstream_ec) co_return upstream_error(host, upstream_ec.message());
  SSL_CTX* native = (*client_context)->native_handle();
  SSL_CTX_set_tlsext_servername_callback(native, check_server_name);
  SSL_CTX_set_tlsext_servername_arg(native, const_cast<std::string*>(&host));
  client.expires_after(timeout);
  auto [client_ec] = co_await http::async_start_tls_server(client, **client_context, use_tuple);
  client.expires_never();
  SSL_CTX_set_tlsext_servername_arg(native, nullptr);  // `host` may go; no handshake follows
  if (client_ec)
    co_return make_error(errc::invalid_argument, "client of " + host + ": TLS handshake: " + client_ec.message());
  co_return interception_contexts{std::move(*client_context), std::move(upstream_context)};
}

asio::awaitable<result<intercepted>> intercept(http::any_stream client, interception_request req, leaf_cache& leaves,
                                               const interception_ca& ca,
                                               std::shared_ptr<ssl::context> upstream_context) {
  auto leaf = leaves.leaf_for(req.host, std::chrono::system_clock::now());
  if (!leaf) {
    client.close();
    co_return std::move(leaf).err();
  }
  auto client_context = make_interception_context(*leaf, ca);
  if (!client_context) {
    client.close();
    co_return std::move(client_context).err();
  }

  // The upstream first: only a host that proves itself is answered for.
  std::optional<http::any_stream> upstream;
  error_code ec = asio::error::host_unreachable;
  for (const auto& address : req.addresses) {
    upstream.emplace(client.get_executor());
    upstream->expires_after(req.timeout);
    auto [connect_ec] = co_await upstream->async_connect(address, use_tuple);
    ec = connect_ec;
    if (!ec) break;
    upstream->close();
  }
  if (ec || !upstream) {
    client.close();
    co_return upstream_error(req.host, "connect: " + ec.message());
  }
  upstream->expires_after(req.timeout);
  auto [upstream_ec] = co_await http::async_start_tls_client(*upstream, *upstream_context, req.host, use_tuple);
  if (upstream_ec) {
    upstream->close();
    client.close();
    co_return upstream_error(req.host, upstream_ec.message());
  }

  client.expires_after(req.timeout);
  auto [client_ec] = co_await http::async_start_tls_server(client, **client_context, use_tuple);
  if (client_ec) {
    upstream->close();
    client.close();
    co_return make_error(errc::invalid_argument, "client of " + req.host + ": TLS handshake: " + client_ec.message());
  }
  client.expires_never();
  upstream->expires_never();
  co_return intercepted{std::move(*client_context), std::move(upstream_context), std::move(client),
                        std::move(*upstream)};
}

}  // namespace sandfort::secrets
