#include "sandfort/proxy/proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <spdlog/spdlog.h>

#include "sandfort/metrics/catalog.hpp"
#include "sandfort/http/use_tuple.hpp"
#include "state.hpp"

namespace sandfort::proxy {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Closed at once with a reset: the flood's peer learns nothing, and our side keeps no
// TIME_WAIT socket for it.
void refuse(egress_proxy::state& st, tcp::socket& socket, const asio::ip::address& source, detail::refusal why) {
  boost::system::error_code ignored;
  socket.set_option(asio::socket_base::linger(true, 0), ignored);
  socket.close(ignored);
  metrics::egress_decisions().inc({"closed_at_accept"});  // no answer, but a decision all the same
  if (auto line = st.admission.note_refusal(source, why, std::chrono::steady_clock::now())) spdlog::warn("{}", *line);
}

asio::awaitable<void> accept_loop(std::shared_ptr<egress_proxy::state> st, std::shared_ptr<tcp::acceptor> acceptor) {
  while (!st->stopping) {
    auto [ec, socket] = co_await acceptor->async_accept(use_tuple);
    if (st->stopping || !acceptor->is_open() || ec == asio::error::operation_aborted) break;
    if (ec) {
      co_await st->backoff.after(ec);
      continue;
    }
    boost::system::error_code peer_ec;
    auto peer = socket.remote_endpoint(peer_ec);
    if (peer_ec) continue;  // gone already; the socket closes here
    // Accepted and closed rather than left in the backlog: the backlog drains, and a flood
    // costs a descriptor for a moment, not for the header timeout.
    if (auto why = st->admission.admit(peer.address()); why != detail::refusal::none) {
      refuse(*st, socket, peer.address(), why);
      continue;
    }
    // We write what we read, as soon as we read it: Nagle would only add latency.
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    asio::co_spawn(st->ioc, detail::serve(st, std::move(socket), peer.address()), asio::detached);
  }
}

detail::admission_limits limits_of(const proxy_options& o) {
  return {o.max_pending_per_source, o.max_pending, o.max_tunnels, o.max_tunnels_per_sandbox, o.refusal_log_period};
}

// "ip:port" or "[ipv6]:port", port 0..65535.
result<tcp::endpoint> parse_listen_address(const std::string& host_port) {
  auto bad = make_error(errc::invalid_argument, "listen address must be IP:PORT, not '" + host_port + "'");
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos) return bad;
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  std::string_view port_text = std::string_view(host_port).substr(colon + 1);
  unsigned port = 0;
  auto [end, err] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec || port_text.empty() || err != std::errc{} || end != port_text.data() + port_text.size() || port > 65535)
    return bad;
  return tcp::endpoint(addr, static_cast<unsigned short>(port));
}

}  // namespace

egress_proxy::state::state(asio::io_context& io, proxy_options o, egress_directory& d, name_resolver& r)
    : ioc(io),
      options(std::move(o)),
      policy(options.allowed_ranges),
      directory(d),
      resolver(r),
      admission(limits_of(options)),
      backoff("egress proxy", [](const std::string& line) { spdlog::warn("{}", line); }) {}

egress_proxy::egress_proxy(asio::io_context& ioc, proxy_options options, egress_directory& directory,
                           name_resolver& resolver)
    : state_(std::make_shared<state>(ioc, std::move(options), directory, resolver)) {}

egress_proxy::~egress_proxy() {
  stop();
  state_->on_decision = nullptr;
}

result<unsigned short> egress_proxy::listen(const std::string& host_port) {
  auto endpoint = parse_listen_address(host_port);
  if (!endpoint) return std::move(endpoint).err();
  auto acceptor = std::make_shared<tcp::acceptor>(state_->ioc);
  boost::system::error_code ec;
  acceptor->open(endpoint->protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(*endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(errc::unavailable, "cannot listen on " + host_port + ": " + ec.message());
  auto port = acceptor->local_endpoint().port();
  state_->acceptors.push_back(acceptor);
  asio::co_spawn(state_->ioc, accept_loop(state_, acceptor), asio::detached);
  return port;
}

void egress_proxy::stop() {
  auto& st = *state_;
  st.stopping = true;
  boost::system::error_code ignored;
  for (auto& acceptor : st.acceptors) acceptor->close(ignored);
  st.acceptors.clear();
  for (auto* c : st.connections) c->close("proxy stopped");
}

asio::awaitable<void> egress_proxy::serve_link(const std::string& sandbox_id, http::any_stream link) {
  auto st = state_;
  if (st->stopping) co_return;
  co_await detail::serve_link(st, std::move(link), sandbox_id);
}

void egress_proxy::disconnect(const std::string& sandbox_id) {
  for (auto* c : state_->connections) {
    if (c->sandbox_id != sandbox_id) continue;
    c->forget_traffic = true;
    c->close("sandbox disconnected");
  }
  state_->per_sandbox.erase(sandbox_id);
}

void egress_proxy::enable_interception(interception_directory& directory,
                                       std::shared_ptr<boost::asio::ssl::context> upstream_context) {
  state_->interception = &directory;
  state_->upstream_context = std::move(upstream_context);
}

void egress_proxy::on_decision(std::function<void(const egress_event&)> callback) {
  state_->on_decision = std::move(callback);
}

egress_proxy::traffic egress_proxy::totals() const { return state_->total; }

std::optional<egress_proxy::traffic> egress_proxy::sandbox_traffic(const std::string& sandbox_id) const {
  auto it = state_->per_sandbox.find(sandbox_id);
  if (it == state_->per_sandbox.end()) return std::nullopt;
  return it->second;
}

std::size_t egress_proxy::active_connections() const { return state_->connections.size(); }

egress_proxy::admissions egress_proxy::admission_counts() const {
  const auto& a = state_->admission;
  return {a.pending(), a.tunnels(), a.refused_per_source(), a.refused_pending(), state_->backoff.failures()};
}

}  // namespace sandfort::proxy
