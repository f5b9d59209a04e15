// The file API of the real sandfort-agent binary, over its unix socket: streamed uploads and
// downloads, list/stat, mkdir/move/delete, and what an interrupted upload leaves behind.

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "agent_client.hpp"
#include "support.hpp"
#include "support/prerequisite.hpp"

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

result<http::response> call(const std::string& socket, http::verb method, const std::string& target,
                            const json* body = nullptr) {
  return sandfort::testing::run_coroutine(
      http::unix_request(socket, http::make_request(method, target, body), http::client_options{}));
}

json body_of(const http::response& res) { return json::parse(res.body()); }

std::string files_target(const std::string& path, const std::string& extra = "") {
  return "/files?path=" + url_encode(path) + extra;
}

raw_response upload(const std::string& socket, const std::string& path, std::string_view content,
                    const std::string& extra = "") {
  raw_connection c(socket);
  c.send_head("PUT", files_target(path, extra), static_cast<long long>(content.size()));
  c.send(content);
  return c.read_response();
}

raw_response download(const std::string& socket, const std::string& path) {
  raw_connection c(socket);
  c.send_head("GET", files_target(path), 0);
  return c.read_response();
}

// Names in dir that look like our temporary files.
std::vector<std::string> temp_files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : stdfs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.find(".sandfort-") != std::string::npos) out.push_back(name);
  }
  return out;
}

// Polls (bounded) until done() holds.
template <typename Fn>
bool wait_for(Fn done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string error_code_of(const std::string& body) { return json::parse(body)["error"]["code"].get<std::string>(); }

// A deterministic stream of pseudo-random bytes (a fixed seed: tests never depend on chance).
class byte_stream {
 public:
  explicit byte_stream(std::uint64_t seed) : rng_(seed) {}
  void fill(char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; i += 8) {
      std::uint64_t v = rng_();
      std::memcpy(data + i, &v, std::min<std::size_t>(8, n - i));
    }
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

TEST_CASE("files: upload and download stream bytes exactly", "[fs]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();

  SECTION("all 256 byte values round-trip, with the answer naming path, size and mode") {
    std::string content;
    for (int i = 0; i < 256; ++i) content.push_back(static_cast<char>(i));
    auto put = upload(sock, dir / "bytes.bin", content);
    REQUIRE(put.status == 201);
    json j = json::parse(put.body);
    CHECK(j["path"] == dir / "bytes.bin");
    CHECK(j["size"] == 256);
    CHECK(j["mode"] == "0644");
    CHECK(read_file(dir / "bytes.bin") == content);
    CHECK(mode_of(dir / "bytes.bin") == 0644);

    auto get = download(sock, dir / "bytes.bin");
    REQUIRE(get.status == 200);
    CHECK(get.headers["content-type"] == "application/octet-stream");
    CHECK(get.headers["content-length"] == "256");
    CHECK(get.body == content);
  }

  SECTION("100 MiB of random bytes round-trip with the same SHA-256") {
    constexpr std::uint64_t total = 100ull << 20;
    constexpr std::size_t piece = 64 * 1024;
    byte_stream bytes(20240501);
    sha256 sent;
    std::vector<char> buf(piece);
    {
      raw_connection c(sock);
      c.send_head("PUT", files_target(dir / "big.bin"), static_cast<long long>(total));
      for (std::uint64_t done = 0; done < total; done += piece) {
        bytes.fill(buf.data(), piece);
        sent.update(buf.data(), piece);
        c.send({buf.data(), piece});
      }
      auto put = c.read_response();
      REQUIRE(put.status == 201);
      CHECK(json::parse(put.body)["size"] == total);
    }
    std::string sent_hex = sent.hex();
    CHECK(stdfs::file_size(dir / "big.bin") == total);

    sha256 received;
    raw_connection c(sock);
    c.send_head("GET", files_target(dir / "big.bin"), 0);
    auto get = c.read_response([&](const char* data, std::size_t n) { received.update(data, n); });
    REQUIRE(get.status == 200);
    CHECK(get.complete);
    CHECK(get.headers["content-length"] == std::to_string(total));
    CHECK(get.body_size == total);
    CHECK(received.hex() == sent_hex);
  }

  SECTION("a chunked body") {
    raw_connection c(sock);
    c.send_head("PUT", files_target(dir / "chunked.txt"), -1);
    std::string expected;
    for (int i = 0; i < 50; ++i) {
      std::string part(static_cast<std::size_t>(i * 997 % 5000 + 1), static_cast<char>('a' + i % 26));
      c.send_chunk(part);
      expected += part;
    }
    c.send_last_chunk();
    auto put = c.read_response();
    REQUIRE(put.status == 201);
    CHECK(json::parse(put.body)["size"] == expected.size());
    CHECK(read_file(dir / "chunked.txt") == expected);
    // The connection is still good for another request.
    c.send_head("GET", files_target(dir / "chunked.txt"), 0);
    auto get = c.read_response();
    CHECK(get.status == 200);
    CHECK(get.body == expected);
  }

  SECTION("missing parents are created, the mode is applied exactly, an empty body makes an empty file") {
    auto put = upload(sock, dir / "a/b/c/run.sh", "#!/bin/sh\necho hi\n", "&mode=0750");
    REQUIRE(put.status == 201);
    CHECK(json::parse(put.body)["mode"] == "0750");
    CHECK(stdfs::is_directory(dir / "a/b/c"));
    CHECK(mode_of(dir / "a/b/c/run.sh") == 0750);

    auto empty = upload(sock, dir / "empty", "");
    REQUIRE(empty.status == 201);
    CHECK(json::parse(empty.body)["size"] == 0);
    CHECK(stdfs::file_size(dir / "empty") == 0);
    auto get = download(sock, dir / "empty");
    CHECK(get.status == 200);
    CHECK(get.headers["content-length"] == "0");
    CHECK(get.body.empty());
  }

  SECTION("an upload replaces a file whole and leaves no temporary file") {
    write_file(dir / "f.txt", "old content that is longer");
    auto put = upload(sock, dir / "f.txt", "new");
    REQUIRE(put.status == 201);
    CHECK(read_file(dir / "f.txt") == "new");
    CHECK(temp_files_in(dir.path()).empty());
  }

  SECTION("relative components are resolved by the kernel") {
    stdfs::create_directories(dir / "x");
    auto put = upload(sock, dir / "x/../y.txt", "yy");
    REQUIRE(put.status == 201);
    CHECK(read_file(dir / "y.txt") == "yy");
  }

  SECTION("refusals") {
    stdfs::create_directories(dir / "d");
    auto onto_dir = upload(sock, dir / "d", "x");
    CHECK(onto_dir.status == 400);
    CHECK(error_code_of(onto_dir.body) == "invalid_argument");
    CHECK(stdfs::is_directory(dir / "d"));

    auto relative = upload(sock, "relative/path.txt", "x");
    CHECK(relative.status == 400);
    auto bad_mode = upload(sock, dir / "m.txt", "x", "&mode=0999");
    CHECK(bad_mode.status == 400);
    CHECK(!stdfs::exists(dir / "m.txt"));
    auto no_path = upload(sock, "", "x");
    CHECK(no_path.status == 400);
    write_file(dir / "file", "f");
    auto through_file = upload(sock, dir / "file/child", "x");
    CHECK(through_file.status == 400);

    auto missing = download(sock, dir / "nope");
    CHECK(missing.status == 404);
    CHECK(error_code_of(missing.body) == "not_found");
    auto a_dir = download(sock, dir / "d");
    CHECK(a_dir.status == 400);
    CHECK(error_code_of(a_dir.body) == "invalid_argument");
    CHECK(temp_files_in(dir.path()).empty());
  }

  SECTION("an interrupted upload leaves the previous content and no temporary file") {
    write_file(dir / "keep.txt", "previous content");
    {
      raw_connection c(sock);
      c.send_head("PUT", files_target(dir / "keep.txt"), 10 << 20);
      std::string part(1 << 20, 'z');
      c.send(part);
      // The agent has started writing the new content (so the test is not won by a race).
      REQUIRE(wait_for([&] { return !temp_files_in(dir.path()).empty(); }));
      c.close();
    }
    CHECK(wait_for([&] { return temp_files_in(dir.path()).empty(); }));
    CHECK(read_file(dir / "keep.txt") == "previous content");
    // And the agent carries on.
    auto get = download(sock, dir / "keep.txt");
    CHECK(get.status == 200);
    CHECK(get.body == "previous content");
  }

  SECTION("a chunked upload cut off mid-body is abandoned too") {
    write_file(dir / "keep2.txt", "v1");
    {
      raw_connection c(sock);
      c.send_head("PUT", files_target(dir / "keep2.txt"), -1);
      c.send_chunk(std::string(100000, 'q'));
      c.send("1000\r\nonly part of a chunk");
      REQUIRE(wait_for([&] { return !temp_files_in(dir.path()).empty(); }));
      c.close();
    }
    CHECK(wait_for([&] { return temp_files_in(dir.path()).empty(); }));
    CHECK(read_file(dir / "keep2.txt") == "v1");
  }
}

TEST_CASE("files: list and stat describe entries with lstat", "[fs]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();
  std::string tree = dir / "tree";
  stdfs::create_directories(tree + "/sub");
  ::chmod((tree + "/sub").c_str(), 0750);
  write_file(tree + "/b.txt", "hello");
  ::chmod((tree + "/b.txt").c_str(), 0640);
  stdfs::create_symlink("b.txt", tree + "/a-link");
  REQUIRE(::mkfifo((tree + "/pipe").c_str(), 0600) == 0);
  const std::regex rfc3339(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");

  SECTION("list") {
    auto res = call(sock, http::verb::get, "/files/list?path=" + url_encode(tree));
    REQUIRE(res.ok());
    REQUIRE(res->result_int() == 200);
    json items = body_of(*res)["items"];
    REQUIRE(items.size() == 4);
    CHECK(items[0]["name"] == "a-link");
    CHECK(items[0]["type"] == "symlink");
    CHECK(items[0]["path"] == tree + "/a-link");
    CHECK(items[0]["size"] == 5);  // the length of the link's target text
    CHECK(items[1]["name"] == "b.txt");
    CHECK(items[1]["type"] == "file");
    CHECK(items[1]["size"] == 5);
    CHECK(items[1]["mode"] == "0640");
    CHECK(items[2]["name"] == "pipe");
    CHECK(items[2]["type"] == "other");
    CHECK(items[3]["name"] == "sub");
    CHECK(items[3]["type"] == "dir");
    CHECK(items[3]["mode"] == "0750");
    for (const auto& item : items) CHECK(std::regex_match(item["mtime"].get<std::string>(), rfc3339));

    // The modification time is the file's, in UTC.
    struct stat st {};
    ::stat((tree + "/b.txt").c_str(), &st);
    std::time_t t = st.st_mtim.tv_sec;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char expected[32];
    std::strftime(expected, sizeof expected, "%Y-%m-%dT%H:%M:%S", &tm);
    CHECK(items[1]["mtime"].get<std::string>().substr(0, 19) == expected);

    // A trailing slash is fine; the paths stay clean.
    auto slashed = call(sock, http::verb::get, "/files/list?path=" + url_encode(tree + "/"));
    REQUIRE(slashed.ok());
    CHECK(body_of(*slashed)["items"][1]["path"] == tree + "/b.txt");
  }

  SECTION("list refusals") {
    auto missing = call(sock, http::verb::get, "/files/list?path=" + url_encode(dir / "nope"));
    REQUIRE(missing.ok());
    CHECK(missing->result_int() == 404);
    auto file = call(sock, http::verb::get, "/files/list?path=" + url_encode(tree + "/b.txt"));
    REQUIRE(file.ok());
    CHECK(file->result_int() == 400);
    auto relative = call(sock, http::verb::get, "/files/list?path=tree");
    REQUIRE(relative.ok());
    CHECK(relative->result_int() == 400);
    auto no_path = call(sock, http::verb::get, "/files/list");
    REQUIRE(no_path.ok());
    CHECK(no_path->result_int() == 400);
  }

  SECTION("stat") {
    auto file = call(sock, http::verb::get, "/files/stat?path=" + url_encode(tree + "/b.txt"));
    REQUIRE(file.ok());
    REQUIRE(file->result_int() == 200);
    json f = body_of(*file);
    CHECK(f["name"] == "b.txt");
    CHECK(f["path"] == tree + "/b.txt");
    CHECK(f["type"] == "file");
    CHECK(f["size"] == 5);
    CHECK(f["mode"] == "0640");
    CHECK(!f.contains("target"));

    auto link = call(sock, http::verb::get, "/files/stat?path=" + url_encode(tree + "/a-link"));
    REQUIRE(link.ok());
    json l = body_of(*link);
    CHECK(l["type"] == "symlink");
    CHECK(l["target"] == "b.txt");

    auto sub = call(sock, http::verb::get, "/files/stat?path=" + url_encode(tree + "/sub"));
    REQUIRE(sub.ok());
    CHECK(body_of(*sub)["type"] == "dir");

    auto missing = call(sock, http::verb::get, "/files/stat?path=" + url_encode(tree + "/nope"));
    REQUIRE(missing.ok());
    CHECK(missing->result_int() == 404);
    CHECK(body_of(*missing)["error"]["code"] == "not_found");
  }
}

TEST_CASE("files: mkdir, move and delete follow the contract's status codes", "[fs]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();
  auto post = [&](const std::string& target, const json& body) {
    auto res = call(sock, http::verb::post, target, &body);
    REQUIRE(res.ok());
    return std::move(*res);
  };
  auto del = [&](const std::string& path, const std::string& extra = "") {
    auto res = call(sock, http::verb::delete_, files_target(path, extra));
    REQUIRE(res.ok());
    return std::move(*res);
  };

  SECTION("mkdir") {
    auto made = post("/files/mkdir", {{"path", dir / "new"}});
    CHECK(made.result_int() == 201);
    CHECK(body_of(made)["type"] == "dir");
    CHECK(body_of(made)["path"] == dir / "new");
    CHECK(stdfs::is_directory(dir / "new"));

    CHECK(post("/files/mkdir", {{"path", dir / "new"}}).result_int() == 409);
    auto again = post("/files/mkdir", {{"path", dir / "new"}, {"parents", true}});
    CHECK(again.result_int() == 200);
    CHECK(body_of(again)["type"] == "dir");

    auto orphan = post("/files/mkdir", {{"path", dir / "p/q/r"}});
    CHECK(orphan.result_int() == 404);
    CHECK(!stdfs::exists(dir / "p"));
    CHECK(post("/files/mkdir", {{"path", dir / "p/q/r"}, {"parents", true}}).result_int() == 201);
    CHECK(stdfs::is_directory(dir / "p/q/r"));

    auto moded = post("/files/mkdir", {{"path", dir / "private"}, {"mode", "0700"}});
    CHECK(moded.result_int() == 201);
    CHECK(body_of(moded)["mode"] == "0700");
    CHECK(mode_of(dir / "private") == 0700);

    write_file(dir / "plain", "x");
    CHECK(post("/files/mkdir", {{"path", dir / "plain"}, {"parents", true}}).result_int() == 409);
    CHECK(post("/files/mkdir", {{"path", dir / "plain/sub"}, {"parents", true}}).result_int() == 400);
    CHECK(post("/files/mkdir", {{"path", "relative"}}).result_int() == 400);
    CHECK(post("/files/mkdir", {{"path", dir / "m"}, {"mode", "rwx"}}).result_int() == 400);
    CHECK(post("/files/mkdir", {{"path", dir / "m"}, {"parents", "yes"}}).result_int() == 400);
    CHECK(post("/files/mkdir", {{"path", dir / "m"}, {"owner", "root"}}).result_int() == 400);
    CHECK(post("/files/mkdir", json::object()).result_int() == 400);
  }

  SECTION("move") {
    write_file(dir / "a.txt", "A");
    write_file(dir / "b.txt", "B");
    auto moved = post("/files/move", {{"from", dir / "a.txt"}, {"to", dir / "c.txt"}});
    CHECK(moved.result_int() == 200);
    CHECK(body_of(moved)["path"] == dir / "c.txt");
    CHECK(body_of(moved)["type"] == "file");
    CHECK(!stdfs::exists(dir / "a.txt"));
    CHECK(read_file(dir / "c.txt") == "A");

    CHECK(post("/files/move", {{"from", dir / "nope"}, {"to", dir / "x"}}).result_int() == 404);
    auto taken = post("/files/move", {{"from", dir / "c.txt"}, {"to", dir / "b.txt"}});
    CHECK(taken.result_int() == 409);
    CHECK(read_file(dir / "b.txt") == "B");
    auto overwritten = post("/files/move", {{"from", dir / "c.txt"}, {"to", dir / "b.txt"}, {"overwrite", true}});
    CHECK(overwritten.result_int() == 200);
    CHECK(read_file(dir / "b.txt") == "A");

    stdfs::create_directories(dir / "d1/inner");
    write_file(dir / "d1/inner/f", "f");
    CHECK(post("/files/move", {{"from", dir / "d1"}, {"to", dir / "d2"}}).result_int() == 200);
    CHECK(read_file(dir / "d2/inner/f") == "f");
    CHECK(post("/files/move", {{"from", dir / "b.txt"}, {"to", dir / "no/such/dir/b"}}).result_int() == 404);
    CHECK(post("/files/move", {{"from", dir / "d2"}, {"to", dir / "d2/inner/x"}}).result_int() == 400);
    CHECK(post("/files/move", {{"from", dir / "b.txt"}}).result_int() == 400);
  }

  SECTION("move across filesystems: files are copied then removed, directories refused") {
    struct stat here {}, shm {};
    if (::stat(dir.path().c_str(), &here) != 0 || ::stat("/dev/shm", &shm) != 0 || here.st_dev == shm.st_dev)
      return testing::missing_prerequisite("no second filesystem at /dev/shm");
    char tmpl[] = "/dev/shm/sfa-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    std::string other = tmpl;
    write_file(dir / "cross.txt", "crossing");
    ::chmod((dir / "cross.txt").c_str(), 0640);
    stdfs::create_symlink("cross.txt", dir / "cross-link");
    stdfs::create_directories(dir / "cross-dir");
    auto moved = post("/files/move", {{"from", dir / "cross.txt"}, {"to", other + "/cross.txt"}});
    CHECK(moved.result_int() == 200);
    CHECK(read_file(other + "/cross.txt") == "crossing");
    CHECK(mode_of(other + "/cross.txt") == 0640);
    CHECK(!stdfs::exists(dir / "cross.txt"));
    CHECK(post("/files/move", {{"from", dir / "cross-link"}, {"to", other + "/cross-link"}}).result_int() == 200);
    CHECK(stdfs::read_symlink(other + "/cross-link") == "cross.txt");
    CHECK(post("/files/move", {{"from", dir / "cross-dir"}, {"to", other + "/cross-dir"}}).result_int() == 400);
    CHECK(stdfs::is_directory(dir / "cross-dir"));
    CHECK(temp_files_in(other).empty());
    stdfs::remove_all(other);
  }

  SECTION("delete") {
    write_file(dir / "f", "x");
    CHECK(del(dir / "f").result_int() == 204);
    CHECK(!stdfs::exists(dir / "f"));
    CHECK(del(dir / "f").result_int() == 404);

    stdfs::create_directories(dir / "empty");
    CHECK(del(dir / "empty").result_int() == 204);

    stdfs::create_directories(dir / "full/deep/er");
    write_file(dir / "full/deep/er/x", "x");
    auto refused = del(dir / "full");
    CHECK(refused.result_int() == 409);
    CHECK(body_of(refused)["error"]["code"] == "conflict");
    CHECK(stdfs::exists(dir / "full/deep/er/x"));
    CHECK(del(dir / "full", "&recursive=false").result_int() == 409);
    CHECK(del(dir / "full", "&recursive=maybe").result_int() == 400);
    CHECK(del(dir / "full", "&recursive=true").result_int() == 204);
    CHECK(!stdfs::exists(dir / "full"));
    CHECK(del("/").result_int() == 400);
  }

  SECTION("recursive delete removes symlinks, never what they point at") {
    stdfs::create_directories(dir / "outside/keep");
    write_file(dir / "outside/keep/precious", "precious");
    stdfs::create_directories(dir / "victim/sub");
    write_file(dir / "victim/sub/file", "x");
    stdfs::create_directory_symlink(dir / "outside", dir / "victim/link-to-outside");
    stdfs::create_directory_symlink(dir / "outside", dir / "victim/sub/link2");
    stdfs::create_symlink(dir / "outside/keep/precious", dir / "victim/file-link");
    CHECK(del(dir / "victim", "&recursive=true").result_int() == 204);
    CHECK(!stdfs::exists(dir / "victim"));
    CHECK(read_file(dir / "outside/keep/precious") == "precious");

    // Deleting a symlink to a directory removes the link alone.
    stdfs::create_directory_symlink(dir / "outside", dir / "just-a-link");
    CHECK(del(dir / "just-a-link", "&recursive=true").result_int() == 204);
    CHECK(read_file(dir / "outside/keep/precious") == "precious");
  }

  SECTION("malformed bodies") {
    http::request req = http::make_request(http::verb::post, "/files/move");
    req.body() = "{oops";
    auto res = sandfort::testing::run_coroutine(http::unix_request(sock, std::move(req), http::client_options{}));
    REQUIRE(res.ok());
    CHECK(res->result_int() == 400);
  }
}

TEST_CASE("files: uploading 1 GiB keeps the agent's memory flat", "[fs][memory]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  // VmRSS: resident now; VmHWM: the peak since the agent started.
  auto status_kib = [&](const std::string& field) {
    std::string status = read_file("/proc/" + std::to_string(agent.pid()) + "/status");
    auto at = status.find(field + ":");
    REQUIRE(at != std::string::npos);
    return std::stol(status.substr(at + field.size() + 1));
  };
  auto rss_kib = [&] { return status_kib("VmRSS"); };
  // Warm up: one small transfer, so the first-use allocations are not counted.
  REQUIRE(upload(agent.socket(), dir / "warm", std::string(1 << 20, 'w')).status == 201);
  long before = rss_kib();
  long peak_before = status_kib("VmHWM");

  constexpr std::uint64_t total = 1ull << 30;
  constexpr std::size_t piece = 256 * 1024;
  std::string zeros(piece, '\0');
  raw_connection c(agent.socket());
  c.send_head("PUT", files_target(dir / "gig.bin"), static_cast<long long>(total));
  for (std::uint64_t sent = 0; sent < total; sent += piece) c.send(zeros);
  auto put = c.read_response();
  REQUIRE(put.status == 201);
  long after = rss_kib();
  long peak_after = status_kib("VmHWM");
  CHECK(stdfs::file_size(dir / "gig.bin") == total);
  WARN("agent VmRSS before 1 GiB upload: " << before << " KiB, after: " << after << " KiB (delta "
                                           << (after - before) << " KiB); peak VmHWM " << peak_before << " -> "
                                           << peak_after << " KiB");
  CHECK(after - before < 8 * 1024);
  CHECK(peak_after - peak_before < 8 * 1024);
  stdfs::remove(dir / "gig.bin");
}
