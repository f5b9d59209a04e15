#include "sandfort/sandbox/agent_connector.hpp"

#include <nlohmann/json.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>

#include "sandfort/http/client.hpp"

namespace sandfort::sandbox {

using nlohmann::json;

std::string sandbox_host_dir(const std::string& state_dir, const std::string& sandbox_id) {
  return state_dir + "/sandboxes/" + sandbox_id;
}

std::string sandbox_run_dir(const std::string& state_dir, const std::string& sandbox_id) {
  return sandbox_host_dir(state_dir, sandbox_id) + "/run";
}

std::string unix_socket_connector::socket_path(const std::string& sandbox_id) const {
  return sandbox_run_dir(state_dir_, sandbox_id) + "/agent.sock";
}

namespace {

// The agent answers errors in the API's own shape; keep its code and message.
error agent_error(const http::response& res) {
  json body = json::parse(res.body(), nullptr, false);
  std::string message = "agent answered " + std::to_string(res.result_int());
  errc code = res.result_int() == 400 ? errc::invalid_argument : errc::internal;
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    message = body["error"].value("message", message);
  }
  return make_error(code, message);
}

json to_agent_json(const agent_exec& call) {
  const exec_request& r = call.request;
  json j = json::object();
  if (!r.argv.empty())
    j["argv"] = r.argv;
  else
    j["command"] = r.command;
  if (!r.cwd.empty()) j["cwd"] = r.cwd;
  if (!r.env.empty()) j["env"] = r.env;
  if (r.stdin_data) j["stdin"] = *r.stdin_data;
  j["timeout_ms"] = call.timeout.count();
  j["max_output_bytes"] = call.max_output_bytes;
  if (r.binary) j["binary"] = true;
  return j;
}

}  // namespace

boost::asio::awaitable<result<void>> unix_socket_connector::health(const std::string& sandbox_id,
                                                                    std::chrono::milliseconds timeout) {
  http::client_options options;
  options.connect_timeout = timeout;
  options.timeout = timeout;
  auto req = http::make_request(http::verb::get, "/health");
  auto path = socket_path(sandbox_id);
  auto res = co_await http::unix_request(path, std::move(req), options);
  if (!res) co_return std::move(res).err();
  if (res->result_int() != 200) co_return agent_error(*res);
  co_return ok_t{};
}

boost::asio::awaitable<result<exec_result>> unix_socket_connector::exec(const std::string& sandbox_id,
                                                                         const agent_exec& call) {
  json body = to_agent_json(call);
  http::client_options options;
  // The agent enforces the command's timeout; ours only catches an agent that stopped answering.
  options.timeout = call.timeout + std::chrono::seconds(10);
  // Worst case per stream: every byte escaped as \u00XX (6x) plus its base64 (4/3x).
  options.body_limit = 16 * call.max_output_bytes + (1u << 20);
  auto req = http::make_request(http::verb::post, "/process/exec", &body);
  auto path = socket_path(sandbox_id);
  auto res = co_await http::unix_request(path, std::move(req), options);
  if (!res) co_return std::move(res).err();
  if (res->result_int() != 200) co_return agent_error(*res);
  json j = json::parse(res->body(), nullptr, false);
  if (!j.is_object()) co_return make_error(errc::internal, "agent sent a malformed exec result");
  exec_result out;
  try {
    out.exit_code = j.at("exit_code").get<int>();
    out.stdout_text = j.value("stdout", "");
    out.stderr_text = j.value("stderr", "");
    if (j.contains("stdout_b64")) out.stdout_b64 = j["stdout_b64"].get<std::string>();
    if (j.contains("stderr_b64")) out.stderr_b64 = j["stderr_b64"].get<std::string>();
    out.duration_ms = j.value("duration_ms", std::int64_t{0});
    out.timed_out = j.value("timed_out", false);
    out.truncated = j.value("truncated", false);
    out.oom_killed = j.value("oom_killed", false);
  } catch (const json::exception& e) {
    co_return make_error(errc::internal, std::string("agent sent a malformed exec result: ") + e.what());
  }
  co_return out;
}

boost::asio::awaitable<result<std::vector<listening_port>>> unix_socket_connector::ports(
    const std::string& sandbox_id) {
  http::client_options options;
  options.timeout = std::chrono::seconds(10);
  auto res = co_await http::unix_request(socket_path(sandbox_id), http::make_request(http::verb::get, "/ports"), options);
  if (!res) co_return std::move(res).err();
  if (res->result_int() != 200) co_return agent_error(*res);
  json j = json::parse(res->body(), nullptr, false);
  if (!j.is_object() || !j.contains("items") || !j["items"].is_array())
    co_return make_error(errc::internal, "agent sent a malformed port list");
  std::vector<listening_port> out;
  try {
    for (const auto& item : j["items"]) {
      listening_port p;
      p.port = item.at("port").get<int>();
      p.address = item.value("address", "");
      p.family = item.value("family", "");
      if (item.contains("pid") && item["pid"].is_number_integer()) p.pid = item["pid"].get<int>();
      if (item.contains("process") && item["process"].is_string()) p.process = item["process"].get<std::string>();
      out.push_back(std::move(p));
    }
  } catch (const json::exception& e) {
    co_return make_error(errc::internal, std::string("agent sent a malformed port list: ") + e.what());
  }
  co_return out;
}

boost::asio::awaitable<result<void>> unix_socket_connector::exec_stream(const std::string& sandbox_id,
                                                                       const agent_exec& call, byte_sink& sink) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
  using unix_socket = asio::local::stream_protocol;

  beast::basic_stream<unix_socket> stream(co_await asio::this_coro::executor);
  stream.expires_after(std::chrono::seconds(2));
  auto path = socket_path(sandbox_id);
  auto [cec] = co_await stream.async_connect(unix_socket::endpoint(path), use_tuple);
  if (cec) co_return make_error(errc::unavailable, "cannot connect to the sandbox agent: " + cec.message());

  json body = to_agent_json(call);
  auto req = http::make_request(http::verb::post, "/process/exec", &body);
  req.set(http::bhttp::field::accept, "text/event-stream");
  stream.expires_after(std::chrono::seconds(10));
  auto [wec, wn] = co_await http::bhttp::async_write(stream, req, use_tuple);
  if (wec) co_return make_error(errc::unavailable, "write to the sandbox agent failed: " + wec.message());

  // If the reader leaves, closing our end makes the agent kill the command.
  sink.abandon = [&stream] {
    beast::error_code ignored;
    stream.socket().close(ignored);
  };
  struct forget {
    byte_sink& s;
    ~forget() { s.abandon = nullptr; }
  } on_exit{sink};

  beast::flat_buffer buffer;
  http::bhttp::response_parser<http::bhttp::buffer_body> parser;
  parser.body_limit(boost::none);
  auto [hec, hn] = co_await http::bhttp::async_read_header(stream, buffer, parser, use_tuple);
  if (hec) co_return make_error(errc::unavailable, "the sandbox agent did not answer: " + hec.message());
  std::vector<char> chunk(64 * 1024);
  std::string error_body;
  // The command's own timeout ends the stream; this only catches an agent that went silent.
  stream.expires_after(call.timeout + std::chrono::seconds(10));
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    auto [ec, n] = co_await http::bhttp::async_read_some(stream, buffer, parser, use_tuple);
    if (ec && ec != http::bhttp::error::need_buffer) break;
    std::string_view got(chunk.data(), chunk.size() - parser.get().body().size);
    if (parser.get().result_int() != 200) {
      error_body.append(got);
      continue;
    }
    // Closing our end makes the agent kill the command: nobody is reading any more.
    if (!got.empty() && !co_await sink.write(got)) co_return ok_t{};
  }
  if (parser.get().result_int() != 200) {
    http::response res{parser.get().result(), 11};
    res.body() = error_body;
    co_return agent_error(res);
  }
  co_return ok_t{};
}

}  // namespace sandfort::sandbox
