// Attacker: anyone on the internet who can reach the preview listener (public previews need no
// token at all). The request head goes through Beast's parser, then the preview router reads the
// Host (and Origin) as "<port>-<sandbox id>.<domain>", and takes its own credentials out of the
// query (?sandfort_token=) and the cookies (sandfort_preview_token) before the application sees
// the request. Mirrors preview/server.cpp decide() and strip_credentials().

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "sandfort/core/ids.hpp"
#include "sandfort/http/message.hpp"
#include "sandfort/preview/address.hpp"
#include "sandfort/http/cookie.hpp"
#include "sandfort/preview/request.hpp"
#include "support.hpp"

namespace bhttp = boost::beast::http;
using namespace sandfort;
using namespace sandfort::preview;

namespace {

constexpr std::string_view domain = "preview.localhost";
constexpr std::string_view token_cookie = "sandfort_preview_token";
constexpr std::string_view token_parameter = "sandfort_token";

void check_host(std::string_view host) {
  auto a = parse_host(host, domain);
  if (!a) return;
  FUZZ_CHECK(a->port != 0);
  FUZZ_CHECK(is_id(a->sandbox_id, "sbx-"));
  // The URL we hand out for that sandbox and port names the same thing.
  for (unsigned short listener : {80, 8081}) {
    auto url = url_for(domain, a->sandbox_id, a->port, listener);
    FUZZ_CHECK(url.starts_with("http://"));
    auto back = parse_host(std::string_view(url).substr(7), domain);
    FUZZ_CHECK(back && back->port == a->port && back->sandbox_id == a->sandbox_id);
  }
  auto token = make_token("key", a->sandbox_id, a->port);
  FUZZ_CHECK(token.size() == 64);
}

void check_query(std::string_view target) {
  auto q = take_query_parameter(target, token_parameter);
  auto question = target.find('?');
  FUZZ_CHECK(q.target.substr(0, q.target.find('?')) == target.substr(0, question));
  if (question == std::string_view::npos) FUZZ_CHECK(!q.value && q.target == target);
  // What is forwarded carries no token parameter, whatever its spelling.
  auto again = take_query_parameter(q.target, token_parameter);
  FUZZ_CHECK(!again.value);
  FUZZ_CHECK(again.target == q.target);
  FUZZ_CHECK(q.target.size() <= target.size());
}

void check_cookie(std::string_view header) {
  auto c = http::take_cookie(header, token_cookie);
  auto again = http::take_cookie(c.rest, token_cookie);
  FUZZ_CHECK(again.values.empty());
  FUZZ_CHECK(again.rest == c.rest);
  FUZZ_CHECK(c.rest.size() <= header.size() + header.size() / 2 + 2);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  // The values alone, so the fuzzer also reaches what Beast's parser would refuse around them.
  check_host(input);
  check_query(input);
  check_cookie(input);
  (void)http::percent_decode(input);

  bhttp::request_parser<bhttp::empty_body> parser;
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_header_done()) return 0;
  const auto& req = parser.get();
  check_host(req[bhttp::field::host]);
  if (auto origin = req[bhttp::field::origin]; !origin.empty()) {
    for (std::string_view scheme : {"http://", "https://"})
      if (origin.starts_with(scheme)) check_host(origin.substr(scheme.size()));
  }
  check_query(req.target());
  for (auto [it, end] = req.equal_range(bhttp::field::cookie); it != end; ++it) check_cookie(it->value());
  return 0;
}
