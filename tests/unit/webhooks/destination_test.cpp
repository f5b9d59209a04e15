#include "sandfort/webhooks/destination.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <map>

using namespace sandfort;
namespace asio = boost::asio;

namespace {

// Names mapped to addresses, as a DNS answer would.
class table_resolver final : public proxy::name_resolver {
 public:
  std::map<std::string, std::vector<std::string>> names;
  asio::awaitable<result<std::vector<asio::ip::address>>> resolve(const std::string& host) override {
    boost::system::error_code ec;
    auto literal = asio::ip::make_address(host, ec);
    if (!ec) co_return std::vector<asio::ip::address>{literal};
    auto it = names.find(host);
    if (it == names.end()) co_return make_error(errc::unavailable, "no such name");
    std::vector<asio::ip::address> out;
    for (const auto& a : it->second) out.push_back(asio::ip::make_address(a));
    co_return out;
  }
};

result<void> check(table_resolver& r, const proxy::egress_policy& policy, const std::string& url) {
  auto parts = webhooks::parse_webhook_url(url);
  if (!parts) return std::move(parts).err();
  asio::io_context ioc;
  auto f = asio::co_spawn(ioc, webhooks::check_destination(*parts, r, policy), asio::use_future);
  ioc.run();
  return f.get();
}

}  // namespace

TEST_CASE("a webhook URL must be http(s), bounded, without user info or fragment") {
  CHECK(webhooks::parse_webhook_url("https://hooks.example.com/x?y=1"));
  CHECK(webhooks::parse_webhook_url("http://hooks.example.com:8080/"));
  CHECK_FALSE(webhooks::parse_webhook_url("ftp://hooks.example.com/"));
  CHECK_FALSE(webhooks::parse_webhook_url("https://user:pw@hooks.example.com/"));
  CHECK_FALSE(webhooks::parse_webhook_url("https://hooks.example.com/#frag"));
  CHECK_FALSE(webhooks::parse_webhook_url("hooks.example.com/x"));
  CHECK_FALSE(webhooks::parse_webhook_url("https://hooks.example.com/" + std::string(2100, 'a')));
}

TEST_CASE("loopback, metadata, private and names resolving to them are refused unless allowed") {
  table_resolver r;
  r.names["hooks.example.com"] = {"93.184.216.34"};
  r.names["rebind.example.com"] = {"93.184.216.34", "127.0.0.1"};  // one bad address is enough
  r.names["inside.example.com"] = {"10.1.2.3"};
  const proxy::egress_policy strict({});
  CHECK(check(r, strict, "https://hooks.example.com/in"));
  for (const char* url : {"http://127.0.0.1:9/", "http://169.254.169.254/latest/meta-data/", "http://[::1]/",
                          "http://10.0.0.1/", "https://rebind.example.com/", "https://inside.example.com/",
                          "http://[::ffff:127.0.0.1]/"}) {
    auto refused = check(r, strict, url);
    INFO(url);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::invalid_argument);
    CHECK(refused.err().message.find("refused") != std::string::npos);
  }
  auto metadata = check(r, strict, "http://169.254.169.254/");
  REQUIRE_FALSE(metadata);
  CHECK(metadata.err().message.find("link-local") != std::string::npos);
  auto unknown = check(r, strict, "https://nowhere.example.com/");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().message.find("does not resolve") != std::string::npos);
  // The operator's range opens exactly that range.
  auto ranges = proxy::parse_cidr_list("10.1.2.0/24");
  REQUIRE(ranges);
  const proxy::egress_policy allowed(*ranges);
  CHECK(check(r, allowed, "https://inside.example.com/"));
  CHECK_FALSE(check(r, allowed, "http://10.1.3.1/"));
  CHECK_FALSE(check(r, allowed, "http://127.0.0.1/"));
}
