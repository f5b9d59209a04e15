// unix_engine against a scripted engine on a unix socket: the request targets it sends
// (version prefix, encoding) and how it reads answers, without needing Docker.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <catch2/catch.hpp>
#include <functional>

#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"
#include "sandfort/http/server.hpp"
#include "support.hpp"
#include "unix_engine.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using json = nlohmann::json;
namespace asio = boost::asio;

namespace {

const json debian_version = json::parse(R"({"Version":"20.10.24+dfsg1","ApiVersion":"1.41","MinAPIVersion":"1.12"})");
const json docker_29_version = json::parse(R"({"Version":"29.0.0","ApiVersion":"1.52","MinAPIVersion":"1.44"})");

class fake_engine {
 public:
  using script = std::function<http::response(const http::request&)>;

  explicit fake_engine(json version_answer, script answer = {})
      : version_(std::move(version_answer)),
        answer_(std::move(answer)),
        path_("/tmp/sf-fake-docker-" + test::unique_token() + ".sock"),
        server_(ioc_, {}, [this](http::context& ctx) { return handle(this, ctx); }) {
    auto listening = server_.listen_unix(path_);
    REQUIRE(listening.ok());
  }
  ~fake_engine() {
    server_.stop();
    ::unlink(path_.c_str());
  }

  unix_engine make_engine() const {
    return unix_engine(unix_engine_options{.socket_path = path_,
                                           .timeout = std::chrono::milliseconds(5'000),
                                           .pull_timeout = std::chrono::milliseconds(5'000)});
  }

  // Runs work on the io_context that also serves the fake engine.
  template <typename T>
  T run(asio::awaitable<T> work) {
    std::optional<T> out;
    asio::co_spawn(
        ioc_, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(work)); },
        [this](std::exception_ptr e) {
          ioc_.stop();
          if (e) std::rethrow_exception(e);
        });
    ioc_.restart();
    ioc_.run_for(std::chrono::seconds(20));
    REQUIRE(out.has_value());
    return std::move(*out);
  }

  // "GET /v1.41/containers/json?all=true", in the order received.
  const std::vector<std::string>& requests() const { return requests_; }
  const std::string& last_body() const { return last_body_; }

 private:
  static asio::awaitable<http::response> handle(fake_engine* self, http::context& ctx) {
    std::string target(ctx.req.target());
    self->requests_.push_back(std::string(ctx.req.method_string()) + " " + target);
    self->last_body_ = ctx.req.body();
    if (target == "/version") co_return http::json_response(200, self->version_);
    if (self->answer_) co_return self->answer_(ctx.req);
    co_return http::json_response(404, {{"message", "page not found"}});
  }

  asio::io_context ioc_;
  json version_;
  script answer_;
  std::string path_;
  std::vector<std::string> requests_;
  std::string last_body_;
  http::server server_;
};

http::response raw_response(unsigned status, std::string body) {
  http::response res{static_cast<http::bhttp::status>(status), 11};
  res.set(http::bhttp::field::content_type, "application/json");
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

}  // namespace

TEST_CASE("calls are prefixed with the negotiated version, asked for once") {
  fake_engine fake(docker_29_version, [](const http::request&) { return http::empty_response(204); });
  auto engine = fake.make_engine();
  REQUIRE(fake.run(engine.start_container("abc")).ok());
  REQUIRE(fake.run(engine.start_container("def")).ok());
  auto v = fake.run(engine.api_version());
  REQUIRE(v.ok());
  CHECK(*v == "1.47");
  CHECK(fake.requests() ==
        std::vector<std::string>{"GET /version", "POST /v1.47/containers/abc/start", "POST /v1.47/containers/def/start"});
}

TEST_CASE("an engine we cannot speak to fails every call with the negotiation error") {
  fake_engine fake(json::parse(R"({"Version":"31.0.0","ApiVersion":"1.55","MinAPIVersion":"1.48"})"));
  auto engine = fake.make_engine();
  auto r = fake.run(engine.inspect_container("abc"));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  CHECK_THAT(r.err().message, Catch::Contains("1.48"));
  CHECK(fake.requests() == std::vector<std::string>{"GET /version"});
}

TEST_CASE("list sends the label filter url-encoded and reads the entries") {
  fake_engine fake(debian_version, [](const http::request&) {
    return raw_response(200, R"([
      {"Id":"aaa","Names":["/sb-1"],"Labels":{"io.sandfort.test":"t 1"},"State":"running","Status":"Up 3 seconds"},
      {"Id":"bbb","Names":["/sb-2"],"Labels":null,"State":"exited","Status":"Exited (137) 2 minutes ago"}])");
  });
  auto engine = fake.make_engine();
  auto found = fake.run(engine.list_containers({"io.sandfort.test=t 1", "io.sandfort.org"}));
  REQUIRE(found.ok());
  CHECK(fake.requests().back() ==
        "GET /v1.41/containers/json?all=true&filters="
        "%7B%22label%22%3A%5B%22io.sandfort.test%3Dt%201%22%2C%22io.sandfort.org%22%5D%7D");
  REQUIRE(found->size() == 2);
  CHECK((*found)[0].id == "aaa");
  CHECK((*found)[0].name == "sb-1");
  CHECK((*found)[0].running);
  CHECK((*found)[0].labels.at("io.sandfort.test") == "t 1");
  CHECK((*found)[1].status == "exited");
  CHECK_FALSE((*found)[1].running);
  CHECK((*found)[1].exit_code == 137);
  CHECK((*found)[1].labels.empty());
}

TEST_CASE("inspect reads state, labels and the name without its slash") {
  fake_engine fake(debian_version, [](const http::request&) {
    return raw_response(200, R"({"Id":"abc123","Name":"/sb-1",
      "State":{"Status":"exited","Running":false,"ExitCode":137,"OOMKilled":true},
      "Config":{"Labels":{"io.sandfort.sandbox":"sb-1"}}})");
  });
  auto engine = fake.make_engine();
  auto info = fake.run(engine.inspect_container("abc123"));
  REQUIRE(info.ok());
  CHECK(fake.requests().back() == "GET /v1.41/containers/abc123/json");
  CHECK(info->id == "abc123");
  CHECK(info->name == "sb-1");
  CHECK(info->status == "exited");
  CHECK_FALSE(info->running);
  CHECK(info->exit_code == 137);
  CHECK(info->oom_killed);
  CHECK(info->labels == std::map<std::string, std::string>{{"io.sandfort.sandbox", "sb-1"}});
}

TEST_CASE("create sends the name in the query and the spec in the body, statuses become error classes") {
  unsigned status = 201;
  fake_engine fake(debian_version, [&](const http::request&) {
    if (status == 201) return raw_response(201, R"({"Id":"new-id","Warnings":[]})");
    return raw_response(status, R"({"message":"Conflict. The container name \"/sb 1\" is already in use"})");
  });
  auto engine = fake.make_engine();
  container_spec spec;
  spec.name = "sb-1";
  spec.image = "sandfort/base:bookworm";
  spec.memory_bytes = 1 << 20;
  auto id = fake.run(engine.create_container(spec));
  REQUIRE(id.ok());
  CHECK(*id == "new-id");
  CHECK(fake.requests().back() == "POST /v1.41/containers/create?name=sb-1");
  CHECK(json::parse(fake.last_body()) == to_create_body(spec));

  status = 409;
  auto conflict = fake.run(engine.create_container(spec));
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.err().code == errc::conflict);
  CHECK_THAT(conflict.err().message, Catch::Contains("HTTP 409 (conflict)"));

  spec.binds = {{"/a:/etc", "/x", false}};
  auto refused = fake.run(engine.create_container(spec));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.err().code == errc::invalid_argument);
}

TEST_CASE("start and stop accept 304, stop passes its grace period, ids are encoded") {
  fake_engine fake(debian_version, [](const http::request&) { return http::empty_response(304); });
  auto engine = fake.make_engine();
  CHECK(fake.run(engine.start_container("abc")).ok());
  CHECK(fake.run(engine.stop_container("abc", 7)).ok());
  CHECK(fake.requests().back() == "POST /v1.41/containers/abc/stop?t=7");
  CHECK(fake.run(engine.start_container("../images/x")).ok());
  CHECK(fake.requests().back() == "POST /v1.41/containers/..%2Fimages%2Fx/start");
  auto empty = fake.run(engine.start_container(""));
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.err().code == errc::invalid_argument);
}

TEST_CASE("remove forces and drops volumes, absent is not_found") {
  fake_engine fake(debian_version, [](const http::request&) {
    return raw_response(404, R"({"message":"No such container: abc"})");
  });
  auto engine = fake.make_engine();
  auto r = fake.run(engine.remove_container("abc"));
  CHECK(fake.requests().back() == "DELETE /v1.41/containers/abc?force=true&v=true");
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::not_found);
  CHECK_THAT(r.err().message, Catch::Contains("remove container abc: Docker answered HTTP 404"));
}

TEST_CASE("image_exists looks the image up by its full name") {
  fake_engine fake(debian_version, [](const http::request& req) {
    if (req.target() == "/v1.41/images/localhost:5000/x/y:latest/json") return raw_response(200, R"({"Id":"sha256:1"})");
    return raw_response(404, R"({"message":"No such image"})");
  });
  auto engine = fake.make_engine();
  auto yes = fake.run(engine.image_exists("localhost:5000/x/y"));
  REQUIRE(yes.ok());
  CHECK(*yes);
  auto no = fake.run(engine.image_exists("sandfort/nosuch:0"));
  REQUIRE(no.ok());
  CHECK_FALSE(*no);
  auto bad = fake.run(engine.image_exists("a//b"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().code == errc::invalid_argument);
}

TEST_CASE("a pull that fails inside an HTTP 200 stream is an error naming the image") {
  fake_engine fake(debian_version, [](const http::request& req) {
    if (req.target().find("tag=ok") != std::string::npos)
      return raw_response(200, "{\"status\":\"Pulling\"}\r\n{\"status\":\"Status: Downloaded newer image\"}\r\n");
    if (req.target().find("tag=down") != std::string::npos)
      return raw_response(500, R"({"message":"Get \"https://localhost:5000/v2/\": connection refused"})");
    return raw_response(200,
                        "{\"status\":\"Pulling from x/y\",\"id\":\"1\"}\r\n"
                        "{\"errorDetail\":{\"message\":\"manifest unknown\"},\"error\":\"manifest unknown\"}\r\n");
  });
  auto engine = fake.make_engine();
  auto failed = fake.run(engine.pull_image("localhost:5000/x/y:1"));
  CHECK(fake.requests().back() == "POST /v1.41/images/create?fromImage=localhost%3A5000%2Fx%2Fy&tag=1");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.err().code == errc::not_found);
  CHECK(failed.err().message ==
        "image \"localhost:5000/x/y:1\" could not be pulled: not found (details in sandfortd's log)");

  auto down = fake.run(engine.pull_image("localhost:5000/x/y:down"));
  REQUIRE_FALSE(down.ok());
  CHECK(down.err().code == errc::unavailable);
  CHECK_THAT(down.err().message, Catch::StartsWith("image \"localhost:5000/x/y:down\" could not be pulled: "));
  CHECK_THAT(down.err().message, Catch::Contains("registry unreachable"));
  CHECK_THAT(down.err().message, !Catch::Contains("connection refused"));  // the engine's words go to the log

  CHECK(fake.run(engine.pull_image("localhost:5000/x/y:ok")).ok());
  CHECK_FALSE(fake.run(engine.pull_image("x@sha256:ab")).ok());
  CHECK(fake.requests().back() == "POST /v1.41/images/create?fromImage=x&tag=sha256%3Aab");
}

TEST_CASE("an engine at a socket that does not exist is unavailable at once") {
  unix_engine engine(unix_engine_options{.socket_path = "/tmp/sf-no-such-docker.sock"});
  auto started = std::chrono::steady_clock::now();
  auto r = test::run(engine.list_containers({}), std::chrono::seconds(10));
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  CHECK_THAT(r.err().message, Catch::Contains("Docker is unreachable at /tmp/sf-no-such-docker.sock"));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(3));
}

TEST_CASE("an engine that accepts but never answers is unavailable after the timeout") {
  // A listening socket nobody accepts from: connecting succeeds (backlog), no answer ever comes.
  std::string path = "/tmp/sf-silent-docker-" + test::unique_token() + ".sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  struct closer {
    int fd;
    std::string path;
    ~closer() {
      ::close(fd);
      ::unlink(path.c_str());
    }
  } close_at_end{fd, path};

  unix_engine engine(unix_engine_options{.socket_path = path, .timeout = std::chrono::milliseconds(300)});
  auto started = std::chrono::steady_clock::now();
  auto r = test::run(engine.inspect_container("abc"), std::chrono::seconds(10));
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().code == errc::unavailable);
  CHECK_THAT(r.err().message, Catch::Contains("Docker is unreachable at " + path));
  CHECK(took < std::chrono::seconds(3));
}

TEST_CASE("volumes: create posts the name and labels, remove maps in-use to conflict") {
  fake_engine fake(debian_version, [](const http::request& req) {
    if (req.method() == http::verb::post && req.target() == "/v1.41/volumes/create")
      return raw_response(201, R"({"Name":"sandfort-vol-1","Driver":"local","Mountpoint":"/v/_data",)"
                               R"("Labels":{"io.sandfort.volume":"vol-1"}})");
    if (req.target() == "/v1.41/volumes/sandfort-vol-1")
      return raw_response(409, R"({"message":"remove sandfort-vol-1: volume is in use - [abc]"})");
    return raw_response(404, R"({"message":"get nosuch: no such volume"})");
  });
  auto engine = fake.make_engine();
  auto made = fake.run(engine.create_volume({"sandfort-vol-1", {{"io.sandfort.volume", "vol-1"}}}));
  REQUIRE(made.ok());
  CHECK(made->mountpoint == "/v/_data");
  CHECK(fake.requests().back() == "POST /v1.41/volumes/create");
  auto in_use = fake.run(engine.remove_volume("sandfort-vol-1"));
  CHECK(fake.requests().back() == "DELETE /v1.41/volumes/sandfort-vol-1");
  REQUIRE_FALSE(in_use.ok());
  CHECK(in_use.err().code == errc::conflict);
  CHECK(fake.run(engine.remove_volume("nosuch")).err().code == errc::not_found);
}

TEST_CASE("volumes: list sends the label filter and reads names, labels and when they were made") {
  fake_engine fake(debian_version, [](const http::request& req) {
    if (req.target().starts_with("/v1.41/volumes?"))
      return raw_response(200, R"({"Volumes":[
        {"Name":"sandfort-vol-1","Driver":"local","Mountpoint":"/v/1/_data","CreatedAt":"2026-01-02T03:00:00Z",
         "Labels":{"io.sandfort.instance":"i1","io.sandfort.volume":"vol-1"},"Scope":"local"},
        {"Name":"sandfort-vol-2","Driver":"local","CreatedAt":"2026-01-02T04:30:00+01:00","Labels":null}],
        "Warnings":null})");
    return raw_response(200, R"({"Volumes":null,"Warnings":null})");
  });
  auto engine = fake.make_engine();
  auto found = fake.run(engine.list_volumes({"io.sandfort.instance=i1", "io.sandfort.volume"}));
  REQUIRE(found.ok());
  CHECK(fake.requests().back() ==
        "GET /v1.41/volumes?filters="
        "%7B%22label%22%3A%5B%22io.sandfort.instance%3Di1%22%2C%22io.sandfort.volume%22%5D%7D");
  REQUIRE(found->size() == 2);
  CHECK((*found)[0].name == "sandfort-vol-1");
  CHECK((*found)[0].mountpoint == "/v/1/_data");
  CHECK((*found)[0].labels.at("io.sandfort.volume") == "vol-1");
  CHECK((*found)[0].created_unix == 1'767'322'800);
  CHECK((*found)[1].created_unix == 1'767'322'800 + 1800);  // 04:30 at +01:00 is 03:30Z
  CHECK((*found)[1].labels.empty());

  auto none = fake.run(engine.list_volumes({}));
  REQUIRE(none.ok());
  CHECK(none->empty());  // "Volumes": null
  CHECK(fake.requests().back() == "GET /v1.41/volumes");
}

TEST_CASE("images: list sends the label filter and reads ids, tags, labels and Created") {
  fake_engine fake(debian_version, [](const http::request& req) {
    if (req.target().starts_with("/v1.41/images/json"))
      return raw_response(200, R"([
        {"Id":"sha256:aaa","ParentId":"","RepoTags":["sandfort-snap/0011:latest"],"RepoDigests":[],
         "Created":1767322800,"Size":1024,"Labels":{"io.sandfort.instance":"i1","io.sandfort.snapshot":"snap-1"}},
        {"Id":"sha256:bbb","RepoTags":["<none>:<none>"],"Created":1767322801,"Labels":null},
        {"Id":"sha256:ccc","RepoTags":null}])");
    if (req.method() == http::verb::delete_ && req.target() == "/v1.41/images/sha256:bbb")
      return raw_response(409, R"({"message":"conflict: unable to delete bbb (must be forced) - image is being used by stopped container 123"})");
    return raw_response(200, R"([{"Deleted":"sha256:aaa"}])");
  });
  auto engine = fake.make_engine();
  auto found = fake.run(engine.list_images({"io.sandfort.instance=i1", "io.sandfort.snapshot"}));
  REQUIRE(found.ok());
  CHECK(fake.requests().back() ==
        "GET /v1.41/images/json?filters="
        "%7B%22label%22%3A%5B%22io.sandfort.instance%3Di1%22%2C%22io.sandfort.snapshot%22%5D%7D");
  REQUIRE(found->size() == 3);
  CHECK((*found)[0].id == "sha256:aaa");
  CHECK((*found)[0].repo_tags == std::vector<std::string>{"sandfort-snap/0011:latest"});
  CHECK((*found)[0].labels.at("io.sandfort.snapshot") == "snap-1");
  CHECK((*found)[0].created_unix == 1'767'322'800);
  CHECK((*found)[1].repo_tags.empty());  // untagged
  CHECK((*found)[1].labels.empty());
  CHECK((*found)[2].repo_tags.empty());
  CHECK((*found)[2].created_unix == 0);

  // Removed by id, never forced: an image a container uses is a conflict.
  REQUIRE(fake.run(engine.remove_image("sha256:aaa")).ok());
  CHECK(fake.requests().back() == "DELETE /v1.41/images/sha256:aaa");
  auto used = fake.run(engine.remove_image("sha256:bbb"));
  REQUIRE_FALSE(used.ok());
  CHECK(used.err().code == errc::conflict);
}

TEST_CASE("volume and image lists that are not what Docker answers are errors") {
  fake_engine fake(debian_version, [](const http::request&) { return raw_response(200, R"("nonsense")"); });
  auto engine = fake.make_engine();
  auto volumes = fake.run(engine.list_volumes({"a"}));
  REQUIRE_FALSE(volumes.ok());
  CHECK(volumes.err().code == errc::internal);
  auto images = fake.run(engine.list_images({"a"}));
  REQUIRE_FALSE(images.ok());
  CHECK(images.err().code == errc::internal);
}
