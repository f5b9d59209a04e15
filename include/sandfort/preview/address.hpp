#pragma once
// Preview host names and tokens. `<port>-<sandbox id>.<preview domain>` names one port of one
// sandbox; its token is an HMAC under the sandbox's key, so it is checked without a lookup
// table and is worthless for any other port or sandbox.

#include <optional>
#include <string>
#include <string_view>

namespace sandfort::preview {

struct preview_address {
  unsigned short port = 0;
  std::string sandbox_id;
};

// Host header "8080-sbx-0123456789abcdef.preview.localhost[:8081]" → {8080, id}. Case-insensitive,
// a trailing dot is allowed; nullopt when malformed, in another domain, with a port outside
// 1..65535 (or written with leading zeros), or with something other than a sandbox id.
std::optional<preview_address> parse_host(std::string_view host_header, std::string_view domain);

// hmac_sha256_hex(key, sandbox_id + ":" + port).
std::string make_token(std::string_view key, std::string_view sandbox_id, unsigned short port);

// "http://{port}-sbx-….<domain>:<listener port>" (no ":80"): the template on the sandbox object.
std::string url_template(std::string_view domain, std::string_view sandbox_id, unsigned short listener_port);
// The same with {port} filled in.
std::string url_for(std::string_view domain, std::string_view sandbox_id, unsigned short port,
                    unsigned short listener_port);

// The link to hand on: url with "/?sandfort_token=<token>" (a "/" first when url has no path:
// curl, urllib and browsers add it themselves, a client that sends the path as it is, like
// http.client, would send a bare "?…", which the router refuses); url as it is when token is
// empty (a public preview).
std::string link_for(std::string url, std::string_view token);

}  // namespace sandfort::preview
