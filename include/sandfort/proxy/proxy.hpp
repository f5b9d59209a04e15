#pragma once
// The egress proxy: the only way out of a sandbox. A connection authenticates with the sandbox's
// credential on its first request (CONNECT or an absolute-form http:// request). The proxy checks
// the credential (407), the target against that sandbox's egress rules (403: allowlist, deny
// list, method/path rules; rules.hpp), resolves the name itself, drops every address the policy
// refuses (403 when none is left), and dials exactly the addresses it checked — never a second
// resolution, so DNS rebinding cannot move the tunnel. A CONNECT tunnel ends the connection's
// requests. A forwarded request goes upstream on a connection of its own with Connection: close;
// when its answer's end can be told (Content-Length, chunked, no body) the client's connection
// stays open and its next request is checked and dialed afresh, against the policy as it is then.
//
// Everything runs on the io_context's one thread and nothing blocks it; call every member on
// that thread (or before it runs).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/http/any_stream.hpp"
#include "sandfort/proxy/injection.hpp"
#include "sandfort/proxy/policy.hpp"
#include "sandfort/proxy/rules.hpp"
#include "sandfort/secrets/interception_ca.hpp"

namespace boost::asio::ssl {
class context;
}

namespace sandfort::proxy {

// What the proxy needs to know about a sandbox (the sandbox service implements the directory).
struct sandbox_egress {
  std::string sandbox_id;
  std::string org_id;
  std::string secret_sha256_hex;  // SHA-256 of the proxy secret, hex
  std::vector<std::string> allowlist;
  // The credential is bound to the sandbox's container as it is now: a connection is accepted
  // only while the sandbox is started and only from this address (its container's on the
  // sandbox network). A secret copied elsewhere, or an address Docker has since given to
  // another container, authenticates nothing (407, "source address").
  std::string state;
  std::string address;
  // Beyond the allowlist (docs/egress.md): host patterns refused whatever allows them, and rules
  // by host, method and path.
  std::vector<std::string> deny = {};
  std::vector<egress_rule> rules = {};
  // The organization secrets the sandbox was created with, their values as they are now
  // (docs/secrets.md): HTTPS to a host one is bound to is intercepted and the value put in.
  std::vector<injected_secret> secrets = {};

  egress_rule_set rule_set() const { return {allowlist, deny, rules}; }
};

class egress_directory {
 public:
  virtual ~egress_directory() = default;
  // The live sandbox with this id, or nullopt (deleted/unknown). Called once per request (a
  // kept-alive connection asks again for each), so a policy changed by PATCH applies to the next
  // request.
  virtual std::optional<sandbox_egress> find(const std::string& sandbox_id) = 0;
};

// Name resolution is a seam so tests map names to addresses without /etc/hosts. An
// implementation should finish promptly when its coroutine is cancelled (the proxy stops or
// the sandbox is deleted while a lookup is pending).
class name_resolver {
 public:
  virtual ~name_resolver() = default;
  virtual boost::asio::awaitable<result<std::vector<boost::asio::ip::address>>> resolve(const std::string& host) = 0;
};

// getaddrinfo through asio's async_resolve, so IP literals in every spelling it accepts
// ("0x7f.1", "2130706433", "::ffff:127.0.0.1") come back as the address they mean. No flags:
// AI_ADDRCONFIG would turn "[::1]" into a resolution failure instead of a refused loopback.
class system_resolver final : public name_resolver {
 public:
  boost::asio::awaitable<result<std::vector<boost::asio::ip::address>>> resolve(const std::string& host) override;
};

// One per decision: logged, counted, and handed to on_decision (the audit chain's egress records).
struct egress_event {
  // The credential's sandbox. When the credential was refused (407): the id it claimed, if it
  // could be read, and the org only if that sandbox exists.
  std::string sandbox_id;
  std::string org_id;
  std::string host;  // normalized; empty when the request had no valid target
  unsigned short port = 0;
  std::string decision;  // "allow" | "deny"
  // deny: why. allow: how the tunnel ended ("closed", "reset", "idle timeout",
  // "sandbox disconnected", "proxy stopped").
  std::string reason;
  int status = 0;               // what the client got (for a forwarded request: the upstream's)
  std::uint64_t bytes_in = 0;   // upstream → sandbox
  std::uint64_t bytes_out = 0;  // sandbox → upstream (for forwarding: the rewritten head too)
  std::chrono::milliseconds duration{0};
  std::string address;  // allow: the address dialed
  std::string source;   // the connecting client's address (the sandbox's, for a valid credential)
  // An intercepted HTTPS request (docs/secrets.md): decided request by request, like a forwarded one.
  bool intercepted = false;
  std::vector<std::string> injected;  // the secrets put into this request, by name (never a value)
};

// An organization's interception CA and the leaves it minted, for intercepting HTTPS.
struct interception_authority {
  std::shared_ptr<const secrets::interception_ca> ca;
  std::shared_ptr<secrets::leaf_cache> leaves;
};

// Where the proxy finds an organization's CA (the daemon keeps them sealed in the store). An
// organization without one gets nullopt: its CONNECTs are never intercepted.
class interception_directory {
 public:
  virtual ~interception_directory() = default;
  virtual std::optional<interception_authority> authority(const std::string& org_id) = 0;
};

// The organization's own proxy, which every outbound connection goes through (docs/egress.md,
// "Upstream proxy"): the policy is applied first, exactly as without it (sandfortd still resolves
// the name and refuses what the address policy refuses); then sandfortd dials this proxy, not the
// destination, and asks it for a tunnel with CONNECT <name>:<port>.
struct upstream_proxy_options {
  std::string host;  // a name or IP literal; not subject to the address policy (the operator set it)
  unsigned short port = 0;
  std::string username;  // Basic credentials; empty: none are sent
  std::string password;
};

struct proxy_options {
  std::optional<upstream_proxy_options> upstream_proxy;
  std::vector<cidr> allowed_ranges;  // addresses an operator allowed despite their class
  std::chrono::milliseconds connect_timeout{10'000};  // per address
  std::chrono::milliseconds idle_timeout{300'000};    // no byte either way: the tunnel closes
  std::chrono::milliseconds header_timeout{10'000};   // to read the whole request head
  std::size_t max_tunnels_per_sandbox = 64;           // concurrent, per sandbox (→ 429)
  // Before its credential is checked a connection is "pending"; beyond these caps one is
  // closed as soon as it is accepted, without an answer (see security.md: connection floods).
  std::size_t max_pending_per_source = 32;  // pending connections from one source address
  std::size_t max_pending = 512;            // pending connections from all sources together
  std::size_t max_tunnels = 4096;           // authenticated connections, all sandboxes (→ 503)
  std::chrono::milliseconds refusal_log_period{5'000};  // one "closed at accept" line per source
  std::size_t header_limit = 8192;                    // request head bytes (→ 400)
  std::size_t max_addresses = 8;  // at most this many checked addresses are dialed, in order
};


class egress_proxy {
 public:
  // The directory and the resolver must outlive every connection: keep them until the
  // io_context has run after stop().
  egress_proxy(boost::asio::io_context& ioc, proxy_options options, egress_directory& directory,
               name_resolver& resolver);
  ~egress_proxy();  // stops, and reports nothing more to on_decision
  egress_proxy(const egress_proxy&) = delete;
  egress_proxy& operator=(const egress_proxy&) = delete;

  // "10.213.0.1:3128" or "[fd00::1]:3128" (an IP literal); port 0 picks a free one. Returns the
  // bound port. May be called once per address to listen on.
  result<unsigned short> listen(const std::string& host_port);
  // Stops accepting and closes every connection; their coroutines end on the next run of the
  // io_context.
  void stop();
  // The sandbox was deleted: close its tunnels (and pending requests) now, and forget its
  // traffic counters.
  void disconnect(const std::string& sandbox_id);
  void on_decision(std::function<void(const egress_event&)> callback);
  // TLS interception for the hosts a sandbox's secrets are bound to, and for CONNECTs that only
  // method/path rules allow (docs/secrets.md, docs/egress.md). Without it such CONNECTs are plain
  // tunnels (secrets) or refused (rules). `upstream_context` verifies the real upstreams
  // (secrets::make_upstream_context). The directory must outlive the proxy's connections.
  void enable_interception(interception_directory& directory,
                           std::shared_ptr<boost::asio::ssl::context> upstream_context);
  // A tunnel link of a sandbox that dials home (src/home/door.hpp): the door proved the sandbox,
  // so no credential is asked for and no source address checked; the allowlist, the address
  // checks, the per-sandbox limits and the decisions are those of a client of listen().
  boost::asio::awaitable<void> serve_link(const std::string& sandbox_id, http::any_stream link);

  struct traffic {
    std::uint64_t bytes_in = 0, bytes_out = 0, allowed = 0, denied = 0;
  };
  // Counted when a decision is reported: for an allowed tunnel, when it ends.
  traffic totals() const;
  std::optional<traffic> sandbox_traffic(const std::string& sandbox_id) const;
  // Connections being served right now (all stages, all sandboxes).
  std::size_t active_connections() const;

  struct admissions {
    std::size_t pending = 0;   // accepted, credential not yet checked
    std::size_t tunnels = 0;   // authenticated
    std::uint64_t refused_per_source = 0;  // closed at accept: max_pending_per_source
    std::uint64_t refused_pending = 0;     // closed at accept: max_pending
    std::uint64_t accept_failures = 0;     // accept itself failed (EMFILE, ...)
  };
  admissions admission_counts() const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace sandfort::proxy
