#pragma once
// The pieces of the OAuth 2.0 authorization code flow (RFC 6749 section 4.1) with PKCE (RFC 7636)
// that need no I/O, for the console's sign-in through an identity provider (console_login.hpp):
// the S256 challenge, the encodings of a query and a token request, the client's Basic
// credentials, and the callback URI the browser comes back to.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"

namespace sandfort::auth::code_flow {

// Where the provider sends the browser back to, below the console's origin.
inline constexpr std::string_view callback_path = "/v1/console/oidc/callback";

// RFC 7636 4.1: 43 to 128 characters of [A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~".
bool is_code_verifier(std::string_view verifier);
// RFC 7636 4.2, S256: BASE64URL(SHA256(ASCII(code_verifier))), no padding.
std::string pkce_challenge(std::string_view verifier);

using fields = std::vector<std::pair<std::string, std::string>>;
// application/x-www-form-urlencoded, as a query string and a token request are written: every byte
// but ALPHA / DIGIT / "-" / "." / "_" / "~" percent-encoded (a space too), pairs joined with '&'.
std::string form_encode(const fields& f);
// `endpoint` with `f` added to its query (an authorization endpoint may carry one of its own).
// invalid_argument when the endpoint has a fragment, which a redirect would drop.
result<std::string> with_query(std::string_view endpoint, const fields& f);

// RFC 6749 2.3.1: "Basic " + base64(form-encoded id ":" form-encoded secret).
std::string basic_credentials(std::string_view client_id, std::string_view client_secret);

// The origin the browser reaches the console at: `public_url` when configured (already checked
// at start), else "http://" (or "https://" when sandfortd serves TLS) + the request's Host.
// invalid_argument when that Host is not a host name or address with an optional port: it goes
// into the redirect URI as it is.
result<std::string> console_origin(std::string_view public_url, std::string_view host_header, bool tls);

// How the console's page names an issuer: the first 16 hex characters of SHA-256(issuer), stable
// across restarts and reorderings of the configuration, and no secret.
std::string issuer_key(std::string_view issuer);

// The host of an issuer's URL, as the default label of its button ("idp.example.com").
std::string host_of(std::string_view url);

}  // namespace sandfort::auth::code_flow
