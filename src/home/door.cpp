// The doors home (door.hpp): one unix listener per sandbox, and the hello of every link.
#include "sandfort/home/door.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <list>

#include "sandfort/http/use_tuple.hpp"

namespace sandfort::home {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;
using sandfort::use_tuple;

struct doors::door {
  door(asio::io_context& ioc, std::string id, std::string directory)
      : sandbox_id(std::move(id)), dir(std::move(directory)), acceptor(ioc) {}
  std::string sandbox_id;
  std::string dir;
  local::acceptor acceptor;
  std::list<http::any_stream*> links;  // saying hello: closed with the door
  std::size_t greeting = 0;
  std::size_t tunnels = 0;
  bool closed = false;
};

namespace {

constexpr const char* socket_name = "home.sock";

// A sandbox id names a directory: only the characters ids are made of.
bool plain_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// Takes a link out of its door's list (and its count) when its coroutine is done with it.
class link_entry {
 public:
  link_entry(doors::door& d, http::any_stream& link, std::size_t& count)
      : d_(d), it_(d.links.insert(d.links.end(), &link)), count_(&count) {
    ++*count_;
  }
  ~link_entry() { leave(); }
  link_entry(const link_entry&) = delete;
  link_entry& operator=(const link_entry&) = delete;
  // The link moves on (to the tunnel handler, which closes it itself): counted in `count` from
  // now on, no longer closed with the door.
  void hand_over(std::size_t& count) {
    --*count_;
    count_ = &count;
    ++*count_;
    d_.links.erase(it_);
    listed_ = false;
  }
  void leave() {
    if (!count_) return;
    --*count_;
    if (listed_) d_.links.erase(it_);
    count_ = nullptr;
  }

 private:
  doors::door& d_;
  std::list<http::any_stream*>::iterator it_;
  std::size_t* count_;
  bool listed_ = true;
};

asio::awaitable<void> greet(std::shared_ptr<doors::door> d, http::any_stream link, link_pool& pool,
                            tunnel_handler tunnels, door_options options) {
  link_entry entry(*d, link, d->greeting);
  auto kind = co_await read_hello(link, options.hello_timeout);
  if (!kind || d->closed) co_return;  // the link closes as it goes out of scope
  if (*kind == link_kind::agent) {
    entry.leave();
    pool.add(d->sandbox_id, std::move(link));
    co_return;
  }
  if (d->tunnels >= options.max_tunnels) co_return;
  entry.hand_over(d->tunnels);
  // The awaitable is made first: GCC 12 mishandles temporaries inside a co_await expression.
  auto tunnelling = tunnels(d->sandbox_id, std::move(link));
  co_await std::move(tunnelling);
}

asio::awaitable<void> accept_links(std::shared_ptr<doors::door> d, link_pool& pool, tunnel_handler tunnels,
                                   door_options options) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer pause(executor);
  for (;;) {
    auto [ec, socket] = co_await d->acceptor.async_accept(use_tuple);
    if (d->closed) co_return;
    if (ec) {
      if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) co_return;
      // Out of descriptors and the like: retrying at once would spin on a readable acceptor.
      pause.expires_after(std::chrono::milliseconds(100));
      co_await pause.async_wait(use_tuple);
      continue;
    }
    if (d->greeting >= options.max_greeting) continue;  // closed as `socket` goes
    asio::co_spawn(executor, greet(d, http::any_stream(std::move(socket)), pool, tunnels, options), asio::detached);
  }
}

result<void> make_dir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
    return make_error(errc::internal, "cannot create " + path + ": " + std::strerror(errno));
  if (::chmod(path.c_str(), mode) != 0)
    return make_error(errc::internal, "cannot chmod " + path + ": " + std::strerror(errno));
  return {};
}

// The door's directory and socket go; a socket file is all that sandfortd ever puts there.
void remove_dir(const std::string& dir) {
  ::unlink((dir + "/" + socket_name).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

doors::doors(asio::io_context& ioc, door_options options, link_pool& pool, tunnel_handler tunnels)
    : ioc_(ioc), options_(std::move(options)), pool_(pool), tunnels_(std::move(tunnels)) {}

doors::~doors() { close_all(); }

result<std::string> doors::open(const std::string& sandbox_id) {
  if (!plain_id(sandbox_id)) return make_error(errc::invalid_argument, "not a sandbox id: " + sandbox_id);
  if (open_.count(sandbox_id)) close(sandbox_id);
  // 0711: sandfortd (root) and Docker find a door by its path; nobody else lists them.
  if (auto made = make_dir(options_.root, 0711); !made) return std::move(made).err();
  // An existing directory is kept: a running container (sandfortd restarted under it) has it
  // mounted, and sees the new socket appear in it; only the socket file is made again.
  const std::string dir = options_.root + "/" + sandbox_id;
  if (auto made = make_dir(dir, 0755); !made) return std::move(made).err();
  const std::string path = dir + "/" + socket_name;
  ::unlink(path.c_str());
  auto d = std::make_shared<door>(ioc_, sandbox_id, dir);
  boost::system::error_code ec;
  d->acceptor.open(local(), ec);
  if (!ec) d->acceptor.bind(local::endpoint(path), ec);
  // Any user inside the sandbox may dial home (a sandbox can run as a non-root user); nobody
  // outside it reaches the directory but root.
  if (!ec && ::chmod(path.c_str(), 0666) != 0) ec.assign(errno, boost::system::system_category());
  if (!ec) d->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    remove_dir(dir);
    return make_error(errc::internal, "cannot listen on " + path + ": " + ec.message());
  }
  asio::co_spawn(ioc_, accept_links(d, pool_, tunnels_, options_), asio::detached);
  open_[sandbox_id] = std::move(d);
  return dir;
}

void doors::close(const std::string& sandbox_id) {
  auto it = open_.find(sandbox_id);
  if (it != open_.end()) {
    auto& d = *it->second;
    d.closed = true;
    boost::system::error_code ignored;
    d.acceptor.close(ignored);
    for (auto* link : d.links) link->close();  // their coroutines leave the list as they end
    remove_dir(d.dir);
    open_.erase(it);
  }
  pool_.drop(sandbox_id);
}

void doors::close_all() {
  for (auto& [id, d] : open_) {
    d->closed = true;
    boost::system::error_code ignored;
    d->acceptor.close(ignored);
    for (auto* link : d->links) link->close();
    ::unlink((d->dir + "/" + socket_name).c_str());
    pool_.drop(id);
  }
  open_.clear();
}

bool doors::is_open(const std::string& sandbox_id) const { return open_.count(sandbox_id) > 0; }

std::size_t doors::busy_links(const std::string& sandbox_id) const {
  auto it = open_.find(sandbox_id);
  return it == open_.end() ? 0 : it->second->greeting + it->second->tunnels;
}

}  // namespace sandfort::home
