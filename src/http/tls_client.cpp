#include "sandfort/http/tls_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <memory>

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;

namespace {

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
  if (!SSL_set_tlsext_host_name(tls.native_handle(), host.c_str())) {
    boost::system::error_code ec(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
    asio::post(stream.get_executor(), beast::bind_front_handler(std::move(completion), ec));
    return;
  }
  tls.set_verify_callback(asio::ssl::host_name_verification(host));
  stream.set_layer(std::move(layer));
  tls.async_handshake(asio::ssl::stream_base::client, std::move(completion));
}

}  // namespace sandfort::http
