#include "sandfort/http/tls_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <memory>
#include <string>

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {

// OpenSSL's verdict on a peer's certificate chain (X509_V_ERR_*), as an error code. (Boost's
// error_category has a protected non-virtual destructor by design: categories are never deleted
// through it.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
class certificate_error_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "certificate"; }
  std::string message(int verdict) const override {
    return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verdict);
  }
};
#pragma GCC diagnostic pop

const boost::system::error_category& certificate_category() {
  static const certificate_error_category category;
  return category;
}

class tls_layer final : public any_stream::layer {
 public:
  tls_layer(any_stream::lowest_type& lowest, asio::ssl::context& context) : tls(lowest, context) {}

  void start_read(const buffer_list<asio::mutable_buffer>& buffers, any_stream::io_handler completion) override {
    tls.async_read_some(buffers, std::move(completion));
  }
  void start_write(const buffer_list<asio::const_buffer>& buffers, any_stream::io_handler completion) override {
    tls.async_write_some(buffers, std::move(completion));
  }
  std::size_t read_some(const buffer_list<asio::mutable_buffer>& buffers, boost::system::error_code& ec) override {
    return tls.read_some(buffers, ec);
  }
  std::size_t write_some(const buffer_list<asio::const_buffer>& buffers, boost::system::error_code& ec) override {
    return tls.write_some(buffers, ec);
  }
  void start_teardown(beast::role_type role, any_stream::done_handler completion) override {
    beast::async_teardown(role, tls, std::move(completion));
  }
  void teardown(beast::role_type role, boost::system::error_code& ec) override { beast::teardown(role, tls, ec); }

  asio::ssl::stream<any_stream::lowest_type&> tls;
};

}  // namespace

void start_tls_client(any_stream& stream, asio::ssl::context& context, const std::string& host,
                      any_stream::done_handler completion) {
  auto layer = std::make_unique<tls_layer>(stream.lowest(), context);
  auto& tls = layer->tls;
  // SNI names a host; RFC 6066 forbids IP literals in it.
  boost::system::error_code not_an_address;
  asio::ip::make_address(host, not_an_address);
  if (not_an_address && !SSL_set_tlsext_host_name(tls.native_handle(), host.c_str())) {
    boost::system::error_code ec(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
    asio::post(stream.get_executor(), beast::bind_front_handler(std::move(completion), ec));
    return;
  }
  tls.set_verify_callback([check = asio::ssl::host_name_verification(host)](bool preverified,
                                                                            asio::ssl::verify_context& ctx) {
    if (check(preverified, ctx)) return true;
    // host_name_verification only rejects a chain OpenSSL accepted at the leaf, for its name;
    // say so, or the failure reads "unspecified certificate verification error".
    if (preverified) X509_STORE_CTX_set_error(ctx.native_handle(), X509_V_ERR_HOSTNAME_MISMATCH);
    return false;
  });
  SSL* ssl = tls.native_handle();
  stream.set_layer(std::move(layer));
  auto executor = completion.get_executor();
  auto slot = completion.get_cancellation_slot();
  tls.async_handshake(asio::ssl::stream_base::client,
                      asio::bind_cancellation_slot(
                          slot, asio::bind_executor(executor, [ssl, completion = std::move(completion)](
                                                                  boost::system::error_code ec) mutable {
                            // A refused certificate says why (expired, unknown issuer, hostname mismatch).
                            if (const long verdict = SSL_get_verify_result(ssl); ec && verdict != X509_V_OK)
                              ec = boost::system::error_code(static_cast<int>(verdict), certificate_category());
                            std::move(completion)(ec);
                          })));
}

void start_tls_server(any_stream& stream, asio::ssl::context& context, any_stream::done_handler completion) {
  auto layer = std::make_unique<tls_layer>(stream.lowest(), context);
  auto& tls = layer->tls;
  stream.set_layer(std::move(layer));
  auto executor = completion.get_executor();
  auto slot = completion.get_cancellation_slot();
  tls.async_handshake(asio::ssl::stream_base::server,
                      asio::bind_cancellation_slot(
                          slot, asio::bind_executor(executor, [completion = std::move(completion)](
                                                                  boost::system::error_code ec) mutable {
                            std::move(completion)(ec);
                          })));
}

}  // namespace sandfort::http
