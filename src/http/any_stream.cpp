#include "sandfort/http/any_stream.hpp"

#include <boost/beast/websocket/teardown.hpp>
#include <tuple>

#include "sandfort/http/use_tuple.hpp"

namespace sandfort::http {

namespace asio = boost::asio;
namespace beast = boost::beast;

any_stream::any_stream(const executor_type& executor) : stream_(std::make_unique<lowest_type>(executor)) {}
any_stream::any_stream(asio::ip::tcp::socket socket)
    : stream_(std::make_unique<lowest_type>(socket_type(std::move(socket)))) {}
any_stream::any_stream(asio::local::stream_protocol::socket socket)
    : stream_(std::make_unique<lowest_type>(socket_type(std::move(socket)))) {}
any_stream::any_stream(any_stream&&) noexcept = default;
any_stream::~any_stream() = default;

any_stream::executor_type any_stream::get_executor() noexcept { return stream_->get_executor(); }
any_stream::socket_type& any_stream::socket() { return stream_->socket(); }
const any_stream::socket_type& any_stream::socket() const { return stream_->socket(); }
any_stream::lowest_type& any_stream::lowest() { return *stream_; }
void any_stream::set_layer(std::unique_ptr<layer> over) { layer_ = std::move(over); }

void any_stream::expires_after(std::chrono::steady_clock::duration after) { stream_->expires_after(after); }
void any_stream::expires_never() { stream_->expires_never(); }
void any_stream::cancel() { stream_->cancel(); }
void any_stream::close() { stream_->close(); }

void any_stream::start_connect(const protocol_type::endpoint& to, done_handler completion) {
  stream_->async_connect(to, std::move(completion));
}

void any_stream::start_read(const buffer_list<asio::mutable_buffer>& buffers, io_handler completion) {
  if (layer_) return layer_->start_read(buffers, std::move(completion));
  stream_->async_read_some(buffers, std::move(completion));
}

void any_stream::start_write(const buffer_list<asio::const_buffer>& buffers, io_handler completion) {
  if (layer_) return layer_->start_write(buffers, std::move(completion));
  stream_->async_write_some(buffers, std::move(completion));
}

std::size_t any_stream::read_some_now(const buffer_list<asio::mutable_buffer>& buffers, boost::system::error_code& ec) {
  if (layer_) return layer_->read_some(buffers, ec);
  return stream_->read_some(buffers, ec);
}

std::size_t any_stream::write_some_now(const buffer_list<asio::const_buffer>& buffers, boost::system::error_code& ec) {
  if (layer_) return layer_->write_some(buffers, ec);
  return stream_->write_some(buffers, ec);
}

void any_stream::start_wait_readable(done_handler completion) {
  stream_->socket().async_wait(socket_type::wait_read, std::move(completion));
}

void any_stream::teardown(beast::role_type role, boost::system::error_code& ec) {
  if (layer_) return layer_->teardown(role, ec);
  beast::websocket::teardown(role, stream_->socket(), ec);
}

void any_stream::start_teardown(beast::role_type role, done_handler completion) {
  if (layer_) return layer_->start_teardown(role, std::move(completion));
  beast::websocket::async_teardown(role, stream_->socket(), std::move(completion));
}

void beast_close_socket(any_stream& stream) {
  boost::system::error_code ignored;
  stream.socket().close(ignored);
}

void teardown(beast::role_type role, any_stream& stream, boost::system::error_code& ec) { stream.teardown(role, ec); }

asio::awaitable<boost::system::error_code> connect_first(any_stream& stream,
                                                        const asio::ip::tcp::resolver::results_type& endpoints) {
  boost::system::error_code ec = asio::error::host_not_found;
  for (const auto& entry : endpoints) {
    boost::system::error_code ignored;
    stream.socket().close(ignored);  // what the previous address left
    std::tie(ec) = co_await stream.async_connect(entry.endpoint(), use_tuple);
    if (!ec || ec == beast::error::timeout) break;
  }
  co_return ec;
}

}  // namespace sandfort::http
