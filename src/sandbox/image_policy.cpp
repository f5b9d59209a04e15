#include "sandfort/sandbox/image_policy.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>

#include "sandfort/proxy/policy.hpp"

namespace sandfort::sandbox {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string normalized_registry(std::string_view registry) {
  auto r = lower(registry);
  return r == "index.docker.io" ? std::string("docker.io") : r;
}

std::optional<std::string> address_reason(const boost::asio::ip::address& a) {
  auto cls = proxy::classify(a);
  if (cls == proxy::address_class::global) return std::nullopt;
  std::string name(proxy::to_string(cls));
  return (std::string_view("aeiou").find(name.front()) != std::string_view::npos ? "an " : "a ") + name + " address";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

error refuse(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }

}  // namespace

std::optional<std::string> local_host_reason(const docker::image_reference& ref) {
  std::string host = lower(ref.host());
  if (ref.ipv6_literal()) {
    boost::system::error_code ec;
    auto a = boost::asio::ip::make_address_v6(host, ec);
    if (ec) return "not an IPv6 address";
    return address_reason(boost::asio::ip::address(a));
  }
  // No top-level domain starts with a digit: a host whose last label does is an address to
  // every resolver, in whatever spelling inet_aton (and so getaddrinfo) accepts.
  std::string_view last_label = std::string_view(host).substr(host.rfind('.') + 1);
  if (!last_label.empty() && is_digit(last_label.front())) {
    in_addr parsed{};
    if (::inet_aton(host.c_str(), &parsed) == 0) return "a numeric host that is no IPv4 address";
    return address_reason(boost::asio::ip::address(boost::asio::ip::address_v4(ntohl(parsed.s_addr))));
  }
  static constexpr std::array<std::string_view, 5> local_suffixes = {"localhost", "local", "internal", "home.arpa",
                                                                      "localdomain"};
  for (auto suffix : local_suffixes)
    if (host == suffix || (host.size() > suffix.size() && host.ends_with(suffix) &&
                           host[host.size() - suffix.size() - 1] == '.'))
      return "a local-use name (." + std::string(suffix) + ")";
  if (host.find('.') == std::string::npos) return "a name of one label (resolved by the host itself)";
  return std::nullopt;
}

image_policy::image_policy(const std::vector<std::string>& allowed, const std::string& default_image) {
  if (allowed.empty()) {
    if (auto d = docker::parse_image_reference(default_image)) allowed_.push_back(normalized_registry(d->registry));
    allowed_.push_back("docker.io");
  } else {
    for (const auto& entry : allowed) allowed_.push_back(normalized_registry(entry));
  }
  std::sort(allowed_.begin(), allowed_.end());
  allowed_.erase(std::unique(allowed_.begin(), allowed_.end()), allowed_.end());
  any_public_ = std::find(allowed_.begin(), allowed_.end(), "*") != allowed_.end();
}

result<void> image_policy::check(std::string_view reference) const {
  auto ref = docker::parse_image_reference(reference);
  if (!ref) return refuse("snapshot: " + ref.err().message);
  std::string registry = normalized_registry(ref->registry);
  // An exact entry wins over everything: that is how an operator allows a local mirror.
  if (std::find(allowed_.begin(), allowed_.end(), registry) != allowed_.end()) return {};
  std::string named = "snapshot \"" + std::string(reference) + "\" names registry \"" + ref->registry + "\"";
  if (auto local = local_host_reason(*ref))
    return refuse(named + ", " + *local + "; a registry that is not public must be listed exactly in "
                  "images.allowed_registries");
  if (any_public_) return {};
  return refuse(named + ", which is not in images.allowed_registries (" + joined(allowed_) + ")");
}

}  // namespace sandfort::sandbox
