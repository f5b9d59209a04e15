#include "engine_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/file_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <cstring>

#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"

namespace sandfort::daemon {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using socket_t = asio::local::stream_protocol::socket;

// An error answer's body is read whole, up to this: Docker's are one JSON line.
constexpr std::uint64_t small_body_limit = 64u << 20;

struct connection {
  asio::io_context ioc;
  socket_t socket{ioc};
};

result<void> open(connection& c, const std::string& path) {
  boost::system::error_code ec;
  c.socket.connect(asio::local::stream_protocol::endpoint(path), ec);
  if (ec) return make_error(errc::unavailable, "cannot reach the Docker engine at " + path + ": " + ec.message());
  return ok_t{};
}

template <class Request>
void set_common(Request& req, const std::string& content_type) {
  req.set(bhttp::field::host, "docker");
  if (!content_type.empty()) req.set(bhttp::field::content_type, content_type);
}

result<engine_answer> read_small(socket_t& s, beast::flat_buffer& buffer, bhttp::response_parser<bhttp::string_body>& p,
                                 const std::string& what) {
  p.body_limit(small_body_limit);
  boost::system::error_code ec;
  bhttp::read(s, buffer, p, ec);
  if (ec) return make_error(errc::unavailable, what + ": " + ec.message());
  return engine_answer{p.get().result_int(), std::move(p.get().body())};
}

}  // namespace

nlohmann::json engine_answer::json() const { return nlohmann::json::parse(body, nullptr, false); }

std::string engine_answer::message() const {
  auto j = json();
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  return body.substr(0, 500);
}

std::string query_escape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

result<engine_files> engine_files::connect(const std::string& socket_path) {
  engine_files unversioned(socket_path, "");
  auto v = unversioned.call("GET", "/version");
  if (!v) return std::move(v).err();
  if (v->status != 200) return make_error(errc::unavailable, "Docker's /version answered " + std::to_string(v->status));
  auto info = docker::parse_version(v->json());
  if (!info) return std::move(info).err();
  auto version = docker::negotiate_api_version(*info);
  if (!version) return std::move(version).err();
  return engine_files(socket_path, "/v" + *version);
}

result<engine_answer> engine_files::call(const std::string& method, const std::string& target, const std::string& body,
                                         const std::string& content_type) {
  connection c;
  if (auto r = open(c, socket_); !r) return std::move(r).err();
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), prefix_ + target, 11};
  set_common(req, body.empty() ? "" : content_type);
  req.body() = body;
  req.prepare_payload();
  boost::system::error_code ec;
  bhttp::write(c.socket, req, ec);
  if (ec) return make_error(errc::unavailable, method + " " + target + ": " + ec.message());
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> p;
  return read_small(c.socket, buffer, p, method + " " + target);
}

result<std::uint64_t> engine_files::download(const std::string& target, const std::string& path) {
  connection c;
  if (auto r = open(c, socket_); !r) return std::move(r).err();
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, prefix_ + target, 11};
  set_common(req, "");
  boost::system::error_code ec;
  bhttp::write(c.socket, req, ec);
  if (ec) return make_error(errc::unavailable, "GET " + target + ": " + ec.message());
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::file_body> p;
  p.body_limit(boost::none);  // an archive of any size, written to disk as it comes
  bhttp::read_header(c.socket, buffer, p, ec);
  if (ec) return make_error(errc::unavailable, "GET " + target + ": " + ec.message());
  if (p.get().result_int() != 200) {
    bhttp::response_parser<bhttp::string_body> small(std::move(p));
    auto answer = read_small(c.socket, buffer, small, "GET " + target);
    if (!answer) return std::move(answer).err();
    return make_error(answer->status == 404 ? errc::not_found : errc::unavailable,
                      "GET " + target + ": " + std::to_string(answer->status) + " " + answer->message());
  }
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return make_error(errc::unavailable, "cannot create " + path + ": " + std::strerror(errno));
  ::close(fd);
  p.get().body().open(path.c_str(), beast::file_mode::write_existing, ec);
  if (ec) return make_error(errc::unavailable, "cannot open " + path + ": " + ec.message());
  bhttp::read(c.socket, buffer, p, ec);
  if (ec) return make_error(errc::unavailable, "GET " + target + " into " + path + ": " + ec.message());
  auto& file = p.get().body().file();
  std::uint64_t size = file.size(ec);
  if (::fsync(file.native_handle()) != 0) return make_error(errc::unavailable, "fsync " + path + ": " + std::strerror(errno));
  return size;
}

result<engine_answer> engine_files::upload(const std::string& method, const std::string& target, const std::string& path) {
  connection c;
  if (auto r = open(c, socket_); !r) return std::move(r).err();
  bhttp::request<bhttp::file_body> req{bhttp::string_to_verb(method), prefix_ + target, 11};
  set_common(req, "application/x-tar");
  boost::system::error_code ec;
  req.body().open(path.c_str(), beast::file_mode::scan, ec);
  if (ec) return make_error(errc::unavailable, "cannot read " + path + ": " + ec.message());
  req.prepare_payload();
  bhttp::write(c.socket, req, ec);
  if (ec) return make_error(errc::unavailable, method + " " + target + ": " + ec.message());
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> p;
  return read_small(c.socket, buffer, p, method + " " + target);
}

}  // namespace sandfort::daemon
