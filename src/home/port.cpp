// A port inside the sandbox over an agent link (port.hpp).
#include "sandfort/home/port.hpp"

#include <boost/asio/write.hpp>
#include <charconv>

#include "sandfort/home/hello.hpp"
#include "sandfort/http/use_tuple.hpp"

namespace sandfort::home {

namespace asio = boost::asio;
using sandfort::use_tuple;

namespace {
// The agent's answers are short: a 101, or an error header.
constexpr std::size_t max_answer_header = 4096;
}  // namespace

std::string port_request(unsigned short port) {
  return "GET /tcp/" + std::to_string(port) +
         " HTTP/1.1\r\nHost: sandfort-agent\r\nConnection: Upgrade\r\nUpgrade: " + std::string(port_upgrade) +
         "\r\n\r\n";
}

unsigned answer_status(std::string_view header) {
  constexpr std::string_view version = "HTTP/1.1 ";
  if (!header.starts_with(version) || header.size() < version.size() + 4 || header[version.size() + 3] != ' ')
    return 0;
  unsigned status = 0;
  auto digits = header.substr(version.size(), 3);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), status);
  return ec == std::errc() && end == digits.data() + digits.size() ? status : 0;
}

asio::awaitable<result<void>> open_port(http::any_stream& link, unsigned short port, std::chrono::milliseconds timeout) {
  const std::string request = port_request(port);
  auto [wec, written] = co_await asio::async_write(link, asio::buffer(request), use_tuple);
  if (wec) co_return make_error(errc::unavailable, "the agent link failed: " + wec.message());
  auto header = co_await read_exactly_through(link, "\r\n\r\n", max_answer_header, timeout);
  if (!header) co_return make_error(errc::unavailable, "the agent did not answer: " + header.err().message);
  const unsigned status = answer_status(*header);
  if (status == 101) co_return result<void>{};
  if (status == 403) co_return make_error(errc::permission_denied, "port " + std::to_string(port) + " is the agent's own");
  co_return make_error(errc::unavailable, "nothing is listening on port " + std::to_string(port));
}

}  // namespace sandfort::home
