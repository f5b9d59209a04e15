#pragma once
// Who a request comes from, for the audit chain and per-client accounting (authentication
// failures, rate refusals). The TCP peer, unless:
//  - the peer is sandfortd's own TLS front (a loopback connection it made; tls_front.hpp): then
//    the client the front accepted, registered for as long as the relay lasts;
//  - that address is a trusted proxy (`trusted_proxies`): then the right-most X-Forwarded-For
//    entry that is not itself a trusted proxy. Entries further left were written by whoever
//    sent the request and prove nothing; from any other peer the header is ignored entirely.

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sandfort/http/server.hpp"
#include "sandfort/proxy/policy.hpp"

namespace sandfort::api {

class client_addresses {
 public:
  explicit client_addresses(std::vector<proxy::cidr> trusted_proxies);

  // The TLS front's loopback connection from `local_port` carries `client`'s requests.
  void relay_opened(unsigned short local_port, const std::string& client);
  void relay_closed(unsigned short local_port);

  std::string resolve(const http::peer& from, std::string_view forwarded_for) const;
  // Whom a connection counts against before its header is read (server_options::idle_source):
  // the peer, or the TLS front's client; "" when that is a trusted proxy, which speaks for many
  // clients whose addresses come only with each request.
  std::string connection_source(const http::peer& from) const;

 private:
  bool trusted(const std::string& address) const;

  std::vector<proxy::cidr> trusted_;
  std::unordered_map<unsigned short, std::string> relays_;
};

}  // namespace sandfort::api
