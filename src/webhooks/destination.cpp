#include "sandfort/webhooks/destination.hpp"

namespace sandfort::webhooks {

result<http::url_parts> parse_webhook_url(const std::string& url) {
  if (url.size() > max_url_bytes)
    return make_error(errc::invalid_argument, "url is longer than " + std::to_string(max_url_bytes) + " bytes");
  if (url.find('#') != std::string::npos) return make_error(errc::invalid_argument, "url must not have a fragment (#…)");
  auto parts = http::parse_url(url);
  if (!parts) return make_error(errc::invalid_argument, "url: " + parts.err().message);
  return parts;
}

boost::asio::awaitable<result<void>> check_destination(const http::url_parts& parts, proxy::name_resolver& resolver,
                                                       const proxy::egress_policy& policy) {
  auto resolving = resolver.resolve(parts.host);
  auto addresses = co_await std::move(resolving);
  if (!addresses || addresses->empty())
    co_return make_error(errc::invalid_argument, "url: the host " + parts.host + " does not resolve" +
                                                     (addresses ? std::string() : " (" + addresses.err().message + ")"));
  for (const auto& a : *addresses)
    if (auto why = policy.refuse_reason(a))
      co_return make_error(errc::invalid_argument,
                           "url: " + parts.host + " is refused: " + *why +
                               " (webhooks reach public addresses only, unless the operator allowed the range in "
                               "webhooks.allowed_ranges)");
  co_return result<void>{};
}

}  // namespace sandfort::webhooks
