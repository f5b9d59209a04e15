#pragma once
// Where a webhook may point (docs/events.md, "Address policy"): checked when it is registered or
// its URL changed, and again at every delivery (dispatcher.cpp, through the URL client's
// refuse_address), against the same policy as sandbox egress (proxy::egress_policy) with the
// operator's webhooks.allowed_ranges.

#include <boost/asio/awaitable.hpp>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/url_client.hpp"
#include "sandfort/proxy/policy.hpp"
#include "sandfort/proxy/proxy.hpp"

namespace sandfort::webhooks {

constexpr std::size_t max_url_bytes = 2048;

// An absolute http:// or https:// URL of at most max_url_bytes, without user info or fragment.
// invalid_argument saying what is wrong.
result<http::url_parts> parse_webhook_url(const std::string& url);

// The host resolved (an IP literal is its own address) and every address checked: invalid_argument
// naming the address and its class when the policy refuses one, or when the name does not resolve.
boost::asio::awaitable<result<void>> check_destination(const http::url_parts& parts, proxy::name_resolver& resolver,
                                                       const proxy::egress_policy& policy);

}  // namespace sandfort::webhooks
