// system_resolver (declared in proxy.hpp).
#include "sandfort/proxy/proxy.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandfort::proxy {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

using addresses = std::vector<asio::ip::address>;

// Lives until getaddrinfo returns, which may be after the coroutine that asked has gone.
struct lookup {
  explicit lookup(const asio::any_io_executor& ex) : resolver(ex), done(ex) {
    done.expires_at(asio::steady_timer::time_point::max());
  }
  tcp::resolver resolver;
  asio::steady_timer done;  // cancelled by the completion handler
  std::optional<result<addresses>> outcome;
};

result<addresses> to_addresses(const std::string& host, const boost::system::error_code& ec,
                               const tcp::resolver::results_type& found) {
  if (ec) return make_error(errc::unavailable, "cannot resolve '" + host + "': " + ec.message());
  addresses out;
  for (const auto& entry : found) {
    auto a = entry.endpoint().address();
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  if (out.empty()) return make_error(errc::unavailable, "'" + host + "' has no address");
  return out;
}

}  // namespace

asio::awaitable<result<addresses>> system_resolver::resolve(const std::string& host) {
  auto ex = co_await asio::this_coro::executor;
  auto pending = std::make_shared<lookup>(ex);
  pending->resolver.async_resolve(host, "", tcp::resolver::flags{},
                                  [pending, host](const boost::system::error_code& ec,
                                                  const tcp::resolver::results_type& found) {
                                    pending->outcome = to_addresses(host, ec, found);
                                    pending->done.cancel();
                                  });
  // asio's resolver ignores per-operation cancellation (getaddrinfo runs on its own thread), so
  // this coroutine waits on a timer instead: cancelling the wait returns at once and leaves the
  // lookup to finish alone.
  co_await pending->done.async_wait(asio::as_tuple(asio::use_awaitable));
  if (pending->outcome) co_return std::move(*pending->outcome);
  pending->resolver.cancel();
  co_return make_error(errc::unavailable, "name resolution of '" + host + "' was cancelled");
}

}  // namespace sandfort::proxy
