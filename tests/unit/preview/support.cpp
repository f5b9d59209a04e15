#include "support.hpp"

#include <boost/asio/this_coro.hpp>

#include "support/run_coroutine.hpp"

namespace sandfort::preview::test {

namespace {

asio::awaitable<std::optional<reply>> fetch_once(unsigned short port, bhttp::request<bhttp::string_body> req) {
  client c(co_await asio::this_coro::executor);
  if (!co_await c.connect(port)) co_return std::nullopt;
  co_return co_await c.send(std::move(req));
}

}  // namespace

std::optional<reply> fetch(unsigned short port, bhttp::request<bhttp::string_body> req) {
  return sandfort::testing::run_coroutine(fetch_once(port, std::move(req)), std::chrono::seconds(60));
}

std::vector<std::pair<std::string, std::string>> seen_headers(const reply& echoed) {
  std::vector<std::pair<std::string, std::string>> out;
  auto seen = nlohmann::json::parse(echoed.body());
  for (const auto& pair : seen.at("headers"))
    out.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  return out;
}

std::string seen_header(const reply& echoed, const std::string& name) {
  for (const auto& [key, value] : seen_headers(echoed))
    if (beast::iequals(key, name)) return value;
  return "";
}

}  // namespace sandfort::preview::test
