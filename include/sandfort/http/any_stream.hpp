#pragma once
// A connected stream socket, TCP or unix, with Beast's per-operation timeouts, whose reads and
// writes are compiled once (any_stream.cpp) rather than once per caller.
//
// Why: Beast's composed operations (HTTP reads and writes, WebSocket frames) call the stream's
// async_read_some/async_write_some with a handler type of their own, and on a beast::basic_stream
// every such handler type instantiates the socket's reactor operations, the timeout timers and the
// executor plumbing again, in every translation unit, for every stream type: that was most of the
// build's time (docs/building.md). Here the handler is erased at the socket (Asio's
// any_completion_handler) and the socket is one type for both protocols, so that machinery exists
// once. What an erased call costs at run time: one small allocation per read or write.

#include <array>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>

namespace sandfort::http {

// The first buffers (up to 16) of a buffer sequence, empty ones left out: what one read or write
// on a socket takes (a read or write of part of a sequence is what read_some/write_some promise).
template <typename Buffer>
class buffer_list {
 public:
  static constexpr std::size_t capacity = 16;

  template <typename Sequence>
  explicit buffer_list(const Sequence& sequence) {
    auto end = boost::asio::buffer_sequence_end(sequence);
    for (auto it = boost::asio::buffer_sequence_begin(sequence); it != end && size_ < capacity; ++it) {
      Buffer buffer(*it);
      if (buffer.size() > 0) items_[size_++] = buffer;
    }
  }

  const Buffer* begin() const { return items_.data(); }
  const Buffer* end() const { return items_.data() + size_; }

 private:
  std::array<Buffer, capacity> items_{};
  std::size_t size_ = 0;
};

// A completion handler with its type erased, and the executor it must complete on (which Beast
// posts to: Asio's any_completion_executor cannot be posted to in Boost 1.81). The cancellation
// slot goes with it, so a cancelled wait (`a || b`) reaches the socket.
template <typename Signature>
class erased_handler {
 public:
  using executor_type = boost::asio::any_io_executor;
  using cancellation_slot_type = boost::asio::cancellation_slot;

  template <typename Handler>
  erased_handler(Handler completion, const executor_type& fallback)
      : executor_(boost::asio::get_associated_executor(completion, fallback)), handler_(std::move(completion)) {}

  executor_type get_executor() const noexcept { return executor_; }
  cancellation_slot_type get_cancellation_slot() const noexcept { return handler_.get_cancellation_slot(); }

  template <typename... Args>
  void operator()(Args&&... args) {
    std::move(handler_)(std::forward<Args>(args)...);
  }

 private:
  executor_type executor_;
  boost::asio::any_completion_handler<Signature> handler_;
};

class any_stream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using protocol_type = boost::asio::generic::stream_protocol;
  using socket_type = protocol_type::socket;
  using io_handler = erased_handler<void(boost::system::error_code, std::size_t)>;
  using done_handler = erased_handler<void(boost::system::error_code)>;

  using lowest_type = boost::beast::basic_stream<protocol_type>;

  // What sits between the caller and the socket when the stream is not plain: TLS
  // (tls_client.hpp, in its own module, because the static agent links this one and must not
  // pull in libssl). Reads, writes and the WebSocket's teardown go through it once set.
  class layer {
   public:
    virtual ~layer() = default;
    virtual void start_read(const buffer_list<boost::asio::mutable_buffer>& buffers, io_handler completion) = 0;
    virtual void start_write(const buffer_list<boost::asio::const_buffer>& buffers, io_handler completion) = 0;
    virtual std::size_t read_some(const buffer_list<boost::asio::mutable_buffer>& buffers,
                                  boost::system::error_code& ec) = 0;
    virtual std::size_t write_some(const buffer_list<boost::asio::const_buffer>& buffers,
                                   boost::system::error_code& ec) = 0;
    virtual void start_teardown(boost::beast::role_type role, done_handler completion) = 0;
    virtual void teardown(boost::beast::role_type role, boost::system::error_code& ec) = 0;
  };

  explicit any_stream(const executor_type& executor);  // not connected yet (async_connect)
  explicit any_stream(boost::asio::ip::tcp::socket socket);
  explicit any_stream(boost::asio::local::stream_protocol::socket socket);
  any_stream(any_stream&&) noexcept;
  ~any_stream();

  executor_type get_executor() noexcept;
  socket_type& socket();
  const socket_type& socket() const;
  // The socket with its deadlines, under any layer: for a layer to build on.
  lowest_type& lowest();
  // From now on reads and writes go through `over` (built on lowest()).
  void set_layer(std::unique_ptr<layer> over);

  // As beast::basic_stream: a deadline for the operations started after it (they fail with
  // beast::error::timeout once it passes), or none.
  void expires_after(std::chrono::steady_clock::duration after);
  void expires_never();
  // Cancels pending operations (they complete with operation_aborted).
  void cancel();
  void close();

  template <typename Endpoint, typename Token>
  auto async_connect(const Endpoint& endpoint, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this](auto completion, const protocol_type::endpoint& to) {
          start_connect(to, done_handler(std::move(completion), get_executor()));
        },
        token, protocol_type::endpoint(endpoint));
  }

  template <typename MutableBufferSequence, typename Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto completion, buffer_list<boost::asio::mutable_buffer> list) {
          start_read(list, io_handler(std::move(completion), get_executor()));
        },
        token, buffer_list<boost::asio::mutable_buffer>(buffers));
  }

  template <typename ConstBufferSequence, typename Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto completion, buffer_list<boost::asio::const_buffer> list) {
          start_write(list, io_handler(std::move(completion), get_executor()));
        },
        token, buffer_list<boost::asio::const_buffer>(buffers));
  }

  // Synchronous reads and writes (the CLI): no deadline applies to them.
  template <typename MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    return read_some_now(buffer_list<boost::asio::mutable_buffer>(buffers), ec);
  }
  template <typename MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <typename ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    return write_some_now(buffer_list<boost::asio::const_buffer>(buffers), ec);
  }
  template <typename ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers) {
    boost::system::error_code ec;
    std::size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // Completes when the socket has bytes to read (or at end of stream), without reading them.
  template <typename Token>
  auto async_wait_readable(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this](auto completion) { start_wait_readable(done_handler(std::move(completion), get_executor())); }, token);
  }

  // For Beast's WebSocket, which closes its next layer through teardown/async_teardown.
  void teardown(boost::beast::role_type role, boost::system::error_code& ec);
  void start_teardown(boost::beast::role_type role, done_handler completion);

 private:
  void start_connect(const protocol_type::endpoint& to, done_handler completion);
  void start_read(const buffer_list<boost::asio::mutable_buffer>& buffers, io_handler completion);
  void start_write(const buffer_list<boost::asio::const_buffer>& buffers, io_handler completion);
  void start_wait_readable(done_handler completion);
  std::size_t read_some_now(const buffer_list<boost::asio::mutable_buffer>& buffers, boost::system::error_code& ec);
  std::size_t write_some_now(const buffer_list<boost::asio::const_buffer>& buffers, boost::system::error_code& ec);

  // Behind a pointer so that a layer's reference to it survives moving the any_stream.
  std::unique_ptr<lowest_type> stream_;
  std::unique_ptr<layer> layer_;
};

// Found by argument-dependent lookup from Beast's WebSocket (and beast::close_socket).
void beast_close_socket(any_stream& stream);
void teardown(boost::beast::role_type role, any_stream& stream, boost::system::error_code& ec);

// Connects to the first of `endpoints` that accepts; the stream's deadline (expires_after) covers
// all the attempts together, and a timeout ends them.
boost::asio::awaitable<boost::system::error_code> connect_first(
    any_stream& stream, const boost::asio::ip::tcp::resolver::results_type& endpoints);

template <typename TeardownHandler>
void async_teardown(boost::beast::role_type role, any_stream& stream, TeardownHandler&& completion) {
  stream.start_teardown(role,
                        any_stream::done_handler(std::forward<TeardownHandler>(completion), stream.get_executor()));
}

}  // namespace sandfort::http
