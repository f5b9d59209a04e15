#include "unix_engine.hpp"

#include "sandfort/docker/messages.hpp"

#include <charconv>
#include <chrono>
#include <mutex>
#include <string_view>
#include <utility>

#include "engine_errors.hpp"
#include "json_access.hpp"
#include "image_ref.hpp"
#include "operation.hpp"
#include "sandfort/http/client.hpp"
#include "sandfort/metrics/catalog.hpp"
#include "spec_validation.hpp"
#include "url.hpp"

namespace sandfort::docker {

namespace {

using http::verb;
using json = nlohmann::json;

// Progress lines of a long pull add up; the whole stream is read before it is scanned.
constexpr std::uint64_t pull_body_limit = 256u << 20;

// Guards api_version_ only (the cache is written once; engines may be shared across threads).
std::mutex api_version_mutex;

http::client_options client_options(std::chrono::milliseconds timeout, std::uint64_t body_limit = 64u << 20) {
  http::client_options o;
  o.timeout = timeout;
  o.body_limit = body_limit;
  return o;
}

// One exchange with the engine; a failed exchange (not an error status) becomes "unreachable".
// Every call is timed here (sandfort_docker_request_duration_seconds).
boost::asio::awaitable<result<http::response>> exchange(const std::string& socket_path, http::request req,
                                                        http::client_options options) {
  metrics::timer timed(metrics::docker_request_duration(),
                       {detail::operation_of(req.method(), req.target()), "unreachable"});
  auto res = co_await http::unix_request(socket_path, std::move(req), options);
  if (res) timed.values()[1] = res->result_int() < 400 ? "ok" : "error";
  if (!res) co_return detail::transport_error(socket_path, res.err());
  co_return std::move(res).value();
}

bool is_status(const http::response& res, std::initializer_list<unsigned> accepted) {
  for (unsigned s : accepted)
    if (res.result_int() == s) return true;
  return false;
}

error error_of(const http::response& res, std::string_view what) {
  return detail::status_error(res.result_int(), res.body(), what);
}

result<json> parse_body(const http::response& res, std::string_view what) {
  auto j = json::parse(res.body(), nullptr, false);
  if (j.is_discarded())
    return make_error(errc::internal, std::string(what) + ": Docker's answer is not JSON: " +
                                          detail::engine_message(res.body()));
  return j;
}

using detail::member;
using detail::string_of;

std::map<std::string, std::string> labels_of(const json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  return out;
}

std::string without_leading_slash(std::string name) {
  if (!name.empty() && name.front() == '/') name.erase(0, 1);
  return name;
}

container_info info_from_inspect(const json& j) {
  container_info info;
  info.id = string_of(member(j, "Id"));
  info.name = without_leading_slash(string_of(member(j, "Name")));
  info.labels = labels_of(member(member(j, "Config"), "Labels"));
  const json& state = member(j, "State");
  info.status = string_of(member(state, "Status"));
  info.running = member(state, "Running").is_boolean() && member(state, "Running").get<bool>();
  if (member(state, "ExitCode").is_number_integer())
    info.exit_code = static_cast<int>(member(state, "ExitCode").get<std::int64_t>());
  info.oom_killed = member(state, "OOMKilled").is_boolean() && member(state, "OOMKilled").get<bool>();
  info.paused = member(state, "Paused").is_boolean() && member(state, "Paused").get<bool>();
  if (info.running && member(state, "Pid").is_number_integer())
    info.pid = static_cast<int>(member(state, "Pid").get<std::int64_t>());
  const json& networks = member(member(j, "NetworkSettings"), "Networks");
  if (networks.is_object())
    for (const auto& [name, endpoint] : networks.items()) {
      std::string address = string_of(member(endpoint, "IPAddress"));
      if (!address.empty()) info.addresses.emplace(name, address);
    }
  const json& driver = member(j, "GraphDriver");
  if (string_of(member(driver, "Name")) == "overlay2")
    info.upper_dir = string_of(member(member(driver, "Data"), "UpperDir"));
  const json& mounts = member(j, "Mounts");
  if (mounts.is_array())
    for (const auto& m : mounts)
      if (string_of(member(m, "Type")) == "volume" && member(m, "RW").is_boolean() && member(m, "RW").get<bool>() &&
          !string_of(member(m, "Source")).empty())
        info.writable_volume_dirs.push_back(string_of(member(m, "Source")));
  return info;
}

// The list endpoint has no ExitCode; its Status text reads "Exited (137) 3 seconds ago".
int exit_code_from_status_text(const std::string& text) {
  constexpr std::string_view prefix = "Exited (";
  if (text.rfind(prefix, 0) != 0) return 0;
  int code = 0;  // not a number: left unknown rather than failing the whole listing
  std::from_chars(text.data() + prefix.size(), text.data() + text.size(), code);
  return code;
}

container_info info_from_list_entry(const json& j) {
  container_info info;
  info.id = string_of(member(j, "Id"));
  const json& names = member(j, "Names");
  if (names.is_array() && !names.empty()) info.name = without_leading_slash(string_of(names.front()));
  info.labels = labels_of(member(j, "Labels"));
  info.status = string_of(member(j, "State"));
  info.paused = info.status == "paused";
  info.running = info.status == "running" || info.paused;  // as inspect's State.Running says
  info.exit_code = exit_code_from_status_text(string_of(member(j, "Status")));
  return info;
}

result<std::string> container_path(const std::string& id, std::string_view suffix = {}) {
  if (id.empty()) return make_error(errc::invalid_argument, "a container id must not be empty");
  return "/containers/" + detail::percent_encode(id) + std::string(suffix);
}

std::string image_path(const detail::image_ref& ref, std::string_view suffix) {
  return "/images/" + detail::percent_encode(ref.lookup_name(), "/:@") + std::string(suffix);
}

// The `filters` query parameter for label filters ("k" or "k=v", all must match).
std::string label_filters_query(const std::vector<std::string>& label_filters) {
  return json{{"label", label_filters}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool read_digits(std::string_view s, std::size_t at, std::size_t n, int& out) {
  if (at + n > s.size()) return false;
  out = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

// RFC 3339 ("2026-01-02T03:04:05Z", "…05.123+02:00") as Docker writes a volume's CreatedAt, in
// unix seconds (fractions dropped); 0 for anything else.
std::int64_t unix_seconds_of_rfc3339(std::string_view s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!read_digits(s, 0, 4, y) || s.size() < 20 || s[4] != '-' || !read_digits(s, 5, 2, mo) || s[7] != '-' ||
      !read_digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !read_digits(s, 11, 2, h) ||
      s[13] != ':' || !read_digits(s, 14, 2, mi) || s[16] != ':' || !read_digits(s, 17, 2, sec))
    return 0;
  std::size_t i = 19;
  if (s[i] == '.') {
    ++i;
    std::size_t digits = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == digits) return 0;
  }
  std::int64_t offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh = 0, om = 0;
    if (!read_digits(s, i + 1, 2, oh) || i + 3 >= s.size() || s[i + 3] != ':' || !read_digits(s, i + 4, 2, om))
      return 0;
    offset = (s[i] == '-' ? -1 : 1) * (std::int64_t{oh} * 3600 + om * 60);
    i += 6;
  } else {
    return 0;
  }
  if (i != s.size()) return 0;
  const std::chrono::year_month_day date{std::chrono::year{y}, std::chrono::month(static_cast<unsigned>(mo)),
                                         std::chrono::day(static_cast<unsigned>(d))};
  if (!date.ok() || h > 23 || mi > 59 || sec > 60) return 0;
  const auto days = std::chrono::sys_days(date).time_since_epoch().count();
  return std::int64_t{days} * 86400 + h * 3600 + mi * 60 + sec - offset;
}

}  // namespace

volume_info parse_volume(const json& body) {
  volume_info info;
  info.name = string_of(member(body, "Name"));
  info.driver = string_of(member(body, "Driver"));
  info.mountpoint = string_of(member(body, "Mountpoint"));
  info.labels = labels_of(member(body, "Labels"));
  info.created_unix = unix_seconds_of_rfc3339(string_of(member(body, "CreatedAt")));
  return info;
}

result<std::vector<volume_info>> parse_volume_list(const json& body) {
  if (!body.is_object()) return make_error(errc::internal, "list volumes: Docker's answer is not a JSON object");
  std::vector<volume_info> out;
  const json& volumes = member(body, "Volumes");  // null when there are none
  if (!volumes.is_array()) return out;
  out.reserve(volumes.size());
  for (const auto& entry : volumes) out.push_back(parse_volume(entry));
  return out;
}

result<std::vector<image_info>> parse_image_list(const json& body) {
  if (!body.is_array()) return make_error(errc::internal, "list images: Docker's answer is not a JSON array");
  std::vector<image_info> out;
  out.reserve(body.size());
  for (const auto& entry : body) {
    image_info info;
    info.id = string_of(member(entry, "Id"));
    const json& tags = member(entry, "RepoTags");  // null, or ["<none>:<none>"], when untagged
    if (tags.is_array())
      for (const auto& t : tags)
        if (t.is_string() && t.get<std::string>() != "<none>:<none>") info.repo_tags.push_back(t.get<std::string>());
    info.labels = labels_of(member(entry, "Labels"));
    if (member(entry, "Created").is_number_integer()) info.created_unix = member(entry, "Created").get<std::int64_t>();
    out.push_back(std::move(info));
  }
  return out;
}

result<image_details> parse_image_details(const json& body) {
  image_details out;
  out.id = string_of(member(body, "Id"));
  if (out.id.empty()) return make_error(errc::internal, "inspect image: Docker's answer has no Id");
  for (const auto& [key, into] : {std::pair{"RepoTags", &out.repo_tags}, std::pair{"RepoDigests", &out.repo_digests}})
    if (const json& list = member(body, key); list.is_array())
      for (const auto& t : list)
        if (t.is_string() && t.get<std::string>() != "<none>:<none>" && t.get<std::string>() != "<none>@<none>")
          into->push_back(t.get<std::string>());
  out.labels = labels_of(member(member(body, "Config"), "Labels"));
  out.parent = string_of(member(body, "Parent"));
  out.raw = body;
  return out;
}

unix_engine::unix_engine(unix_engine_options options) : options_(std::move(options)) {}

std::unique_ptr<engine> make_unix_engine(unix_engine_options options) {
  return std::make_unique<unix_engine>(std::move(options));
}

task<version_info> unix_engine::version() {
  // Unversioned on purpose: this is how the version to use is found.
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::get, "/version"),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {200})) co_return error_of(*res, "ask Docker for its version");
  auto body = parse_body(*res, "ask Docker for its version");
  if (!body) co_return std::move(body).err();
  co_return parse_version(*body);
}

task<std::string> unix_engine::api_version() {
  {
    std::lock_guard lock(api_version_mutex);
    if (!api_version_.empty()) co_return api_version_;
  }
  auto engine_says = co_await version();
  if (!engine_says) co_return std::move(engine_says).err();
  auto chosen = negotiate_api_version(*engine_says);
  if (!chosen) co_return chosen;  // not cached: the engine may be upgraded while we run
  std::lock_guard lock(api_version_mutex);
  api_version_ = *chosen;
  co_return chosen;
}

task<bool> unix_engine::image_exists(const std::string& ref) {
  auto image = detail::split_image_ref(ref);
  if (!image) co_return std::move(image).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto res = co_await exchange(options_.socket_path,
                               http::make_request(verb::get, "/v" + *v + image_path(*image, "/json")),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (is_status(*res, {200})) co_return true;
  if (is_status(*res, {404})) co_return false;
  co_return error_of(*res, "look up image \"" + ref + "\"");
}

task<image_details> unix_engine::inspect_image(const std::string& ref) {
  auto image = detail::split_image_ref(ref);
  if (!image) co_return std::move(image).err();
  auto body = co_await get_json(image_path(*image, "/json"), "inspect image " + ref);
  if (!body) co_return std::move(body).err();
  co_return parse_image_details(*body);
}

task<void> unix_engine::load_image(std::string archive) {
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto req = http::make_request(verb::post, "/v" + *v + "/images/load?quiet=1");
  req.set(http::bhttp::field::content_type, "application/x-tar");
  req.body() = std::move(archive);
  req.prepare_payload();
  auto res = co_await exchange(options_.socket_path, std::move(req), client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {200})) co_return error_of(*res, "load an image");
  // 200 only means the load began: a failure is a line {"errorDetail": …} in the stream.
  if (auto reason = detail::pull_failure_reason(res->body()); !reason.empty())
    co_return make_error(errc::internal, "load an image: " + reason);
  co_return ok_t{};
}

task<void> unix_engine::put_archive(const std::string& id, const std::string& path, std::string archive,
                                    bool as_container_user) {
  auto target = container_path(id, "/archive" + detail::query_string({{"path", path},
                                                                      {"copyUIDGID", as_container_user ? "1" : "0"}}));
  if (!target) co_return std::move(target).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto req = http::make_request(verb::put, "/v" + *v + *target);
  req.set(http::bhttp::field::content_type, "application/x-tar");
  req.body() = std::move(archive);
  req.prepare_payload();
  auto res = co_await exchange(options_.socket_path, std::move(req), client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {200})) co_return error_of(*res, "write into container " + id);
  co_return ok_t{};
}

task<void> unix_engine::pull_image(const std::string& ref) {
  auto image = detail::split_image_ref(ref);
  if (!image) co_return std::move(image).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto target = "/v" + *v + "/images/create" +
                detail::query_string({{"fromImage", image->repository}, {"tag", image->pull_tag()}});
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, target),
                               client_options(options_.pull_timeout, pull_body_limit));
  if (!res) co_return detail::pull_error(ref, res.err().message);
  if (!is_status(*res, {200})) {
    auto e = detail::pull_error(ref, detail::engine_message(res->body()));
    if (res->result_int() == 404) e.code = errc::not_found;
    if (res->result_int() == 400) e.code = errc::invalid_argument;
    co_return e;
  }
  // HTTP 200 only means the pull started: the outcome is in the stream.
  if (auto reason = detail::pull_failure_reason(res->body()); !reason.empty()) co_return detail::pull_error(ref, reason);
  co_return ok_t{};
}

task<std::string> unix_engine::create_container(const container_spec& spec) {
  if (auto valid = detail::validate_spec(spec); !valid) co_return std::move(valid).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto target = "/v" + *v + "/containers/create" + (spec.name.empty() ? "" : detail::query_string({{"name", spec.name}}));
  auto body = to_create_body(spec);
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, target, &body),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  std::string what = "create container \"" + spec.name + "\" from image \"" + spec.image + "\"";
  if (!is_status(*res, {201, 200})) co_return error_of(*res, what);
  auto answer = parse_body(*res, what);
  if (!answer) co_return std::move(answer).err();
  auto id = string_of(member(*answer, "Id"));
  if (id.empty()) co_return make_error(errc::internal, what + ": Docker's answer has no Id");
  co_return id;
}

task<void> unix_engine::start_container(const std::string& id) {
  auto path = container_path(id, "/start");
  if (!path) co_return std::move(path).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, "/v" + *v + *path),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {204, 304})) co_return error_of(*res, "start container " + id);  // 304: already running
  co_return ok_t{};
}

task<void> unix_engine::stop_container(const std::string& id, int timeout_s) {
  if (timeout_s < 0) co_return make_error(errc::invalid_argument, "a stop timeout must not be negative");
  auto path = container_path(id, "/stop" + detail::query_string({{"t", std::to_string(timeout_s)}}));
  if (!path) co_return std::move(path).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  // The engine answers only after the grace period (and the kill after it) is over.
  auto deadline = options_.timeout + std::chrono::seconds(timeout_s);
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, "/v" + *v + *path),
                               client_options(deadline));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {204, 304})) co_return error_of(*res, "stop container " + id);  // 304: not running
  co_return ok_t{};
}

task<void> unix_engine::pause_container(const std::string& id) { return post_container_action(id, "pause"); }

task<void> unix_engine::unpause_container(const std::string& id) { return post_container_action(id, "unpause"); }

task<void> unix_engine::post_container_action(const std::string& id, const std::string& action) {
  auto path = container_path(id, "/" + action);
  if (!path) co_return std::move(path).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, "/v" + *v + *path),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {204})) co_return error_of(*res, action + " container " + id);
  co_return ok_t{};
}

task<void> unix_engine::remove_container(const std::string& id) {
  auto path = container_path(id, detail::query_string({{"force", "true"}, {"v", "true"}}));
  if (!path) co_return std::move(path).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::delete_, "/v" + *v + *path),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {204, 200})) co_return error_of(*res, "remove container " + id);
  co_return ok_t{};
}

task<json> unix_engine::get_json(const std::string& path, const std::string& what) {
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::get, "/v" + *v + path),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {200})) co_return error_of(*res, what);
  co_return parse_body(*res, what);
}

task<storage_info> unix_engine::storage() {
  auto body = co_await get_json("/info", "engine info");
  if (!body) co_return std::move(body).err();
  co_return parse_storage_info(*body);
}

task<std::vector<std::string>> unix_engine::runtimes() {
  auto body = co_await get_json("/info", "engine info");
  if (!body) co_return std::move(body).err();
  std::vector<std::string> names;
  if (auto found = body->find("Runtimes"); found != body->end() && found->is_object())
    for (auto it = found->begin(); it != found->end(); ++it) names.push_back(it.key());
  co_return names;
}

task<container_info> unix_engine::inspect_container(const std::string& id) {
  auto path = container_path(id, "/json");
  if (!path) co_return std::move(path).err();
  std::string what = "inspect container " + id;
  auto body = co_await get_json(*path, what);
  if (!body) co_return std::move(body).err();
  co_return info_from_inspect(*body);
}

task<std::vector<container_info>> unix_engine::list_containers(const std::vector<std::string>& label_filters) {
  std::string target = "/containers/json";
  if (label_filters.empty()) {
    target += detail::query_string({{"all", "true"}});
  } else {
    auto filters = label_filters_query(label_filters);
    target += detail::query_string({{"all", "true"}, {"filters", filters}});
  }
  std::string what = "list containers";
  auto body = co_await get_json(target, what);
  if (!body) co_return std::move(body).err();
  if (!body->is_array()) co_return make_error(errc::internal, "list containers: Docker's answer is not a JSON array");
  std::vector<container_info> out;
  out.reserve(body->size());
  for (const auto& entry : *body) out.push_back(info_from_list_entry(entry));
  co_return out;
}

task<container_stats> unix_engine::stats(const std::string& id) {
  auto path = container_path(id, "/stats?stream=false");
  if (!path) co_return std::move(path).err();
  std::string what = "read the resource use of container " + id;
  auto body = co_await get_json(*path, what);
  if (!body) co_return std::move(body).err();
  co_return parse_stats(*body);
}

task<network_info> unix_engine::inspect_network(const std::string& name) {
  if (name.empty()) co_return make_error(errc::invalid_argument, "a network name must not be empty");
  std::string path = "/networks/" + detail::percent_encode(name);
  std::string what = "inspect network " + name;
  auto body = co_await get_json(path, what);
  if (!body) co_return std::move(body).err();
  co_return parse_network(*body);
}

task<network_info> unix_engine::create_network(const network_spec& spec) {
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto body = to_network_body(spec);
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, "/v" + *v + "/networks/create", &body),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  std::string what = "create network " + spec.name + " (" + spec.subnet + ")";
  // Docker answers 403 when the addresses are taken ("Pool overlaps with other one on this
  // address space"): the operator's fix is another subnet, so the message says so.
  if (res->result_int() == 403)
    co_return make_error(errc::invalid_argument, what + ": " + detail::engine_message(res->body()) +
                                                     " (another Docker network holds these addresses: set network.subnet to a free range)");
  if (!is_status(*res, {201, 200})) co_return error_of(*res, what);
  co_return co_await inspect_network(spec.name);
}

task<volume_info> unix_engine::create_volume(const volume_spec& spec) {
  if (spec.name.empty()) co_return make_error(errc::invalid_argument, "a volume name must not be empty");
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  json body = {{"Name", spec.name}, {"Driver", "local"}, {"Labels", spec.labels}};
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, "/v" + *v + "/volumes/create", &body),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  std::string what = "create volume " + spec.name;
  if (!is_status(*res, {201, 200})) co_return error_of(*res, what);
  auto answer = parse_body(*res, what);
  if (!answer) co_return std::move(answer).err();
  co_return parse_volume(*answer);
}

task<void> unix_engine::remove_volume(const std::string& name) {
  if (name.empty()) co_return make_error(errc::invalid_argument, "a volume name must not be empty");
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto res = co_await exchange(options_.socket_path,
                               http::make_request(verb::delete_, "/v" + *v + "/volumes/" + detail::percent_encode(name)),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {204, 200})) co_return error_of(*res, "remove volume " + name);
  co_return ok_t{};
}

task<std::vector<volume_info>> unix_engine::list_volumes(const std::vector<std::string>& label_filters) {
  std::string target = "/volumes";
  if (!label_filters.empty()) {
    auto filters = label_filters_query(label_filters);
    target += detail::query_string({{"filters", filters}});
  }
  auto body = co_await get_json(target, "list volumes");
  if (!body) co_return std::move(body).err();
  co_return parse_volume_list(*body);
}

task<std::string> unix_engine::commit_container(const std::string& id, const std::string& repo, const std::string& tag,
                                                 const std::map<std::string, std::string>& labels,
                                                 const std::vector<std::string>& env) {
  if (id.empty() || repo.empty() != tag.empty())
    co_return make_error(errc::invalid_argument, "a commit needs a container, and a repository with its tag or neither");
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  json body = {{"Labels", labels}};
  // Docker merges the container's environment under this one, name by name: a name given here wins.
  if (!env.empty()) body["Env"] = env;
  auto target = "/v" + *v + "/commit" +
                (repo.empty() ? detail::query_string({{"container", id}, {"pause", "true"}})
                              : detail::query_string({{"container", id}, {"repo", repo}, {"tag", tag}, {"pause", "true"}}));
  // A commit copies the container's changed files: it may take longer than an ordinary call.
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::post, target, &body),
                               client_options(options_.pull_timeout));
  if (!res) co_return std::move(res).err();
  std::string what = "commit container " + id;
  if (!is_status(*res, {201, 200})) co_return error_of(*res, what);
  auto answer = parse_body(*res, what);
  if (!answer) co_return std::move(answer).err();
  co_return string_of(member(*answer, "Id"));
}

task<std::int64_t> unix_engine::image_size(const std::string& ref) {
  auto image = detail::split_image_ref(ref);
  if (!image) co_return std::move(image).err();
  auto body = co_await get_json(image_path(*image, "/json"), "inspect image " + ref);
  if (!body) co_return std::move(body).err();
  const auto& size = member(*body, "Size");
  if (size.is_number_integer()) co_return size.get<std::int64_t>();
  co_return std::int64_t{0};
}

task<void> unix_engine::remove_image(const std::string& ref) {
  auto image = detail::split_image_ref(ref);
  if (!image) co_return std::move(image).err();
  auto v = co_await api_version();
  if (!v) co_return std::move(v).err();
  auto res = co_await exchange(options_.socket_path, http::make_request(verb::delete_, "/v" + *v + image_path(*image, "")),
                               client_options(options_.timeout));
  if (!res) co_return std::move(res).err();
  if (!is_status(*res, {200})) co_return error_of(*res, "remove image " + ref);
  co_return ok_t{};
}

task<std::vector<image_info>> unix_engine::list_images(const std::vector<std::string>& label_filters) {
  std::string target = "/images/json";
  if (!label_filters.empty()) {
    auto filters = label_filters_query(label_filters);
    target += detail::query_string({{"filters", filters}});
  }
  auto body = co_await get_json(target, "list images");
  if (!body) co_return std::move(body).err();
  co_return parse_image_list(*body);
}

}  // namespace sandfort::docker
