// Tar archives through the real agent: round trips (ours both ways, and GNU tar's and Python's
// formats when those tools are installed), and archives that try to write outside the target.

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "agent_client.hpp"
#include "support.hpp"
#include "support/prerequisite.hpp"

using namespace sandfort;
using namespace sandfort::agent::test;
using nlohmann::json;
namespace stdfs = std::filesystem;

namespace {

// Everything a round trip must keep, per relative path: type, permission bits, content or
// link target, modification time (seconds), and for files which other paths share the inode.
std::map<std::string, std::string> describe_tree(const std::string& root) {
  std::map<std::string, std::string> out;
  std::map<ino_t, std::string> first_name;
  for (auto it = stdfs::recursive_directory_iterator(root); it != stdfs::recursive_directory_iterator(); ++it) {
    std::string path = it->path().string();
    std::string rel = path.substr(root.size() + 1);
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    char mode[16];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    std::string d;
    if (S_ISREG(st.st_mode)) {
      d = "file " + std::string(mode) + " " + read_file(path);
      if (st.st_nlink > 1) {
        auto [at, first] = first_name.try_emplace(st.st_ino, rel);
        d += " link-group:" + at->second;
      }
    } else if (S_ISDIR(st.st_mode)) {
      d = "dir " + std::string(mode);
    } else if (S_ISLNK(st.st_mode)) {
      d = "symlink -> " + stdfs::read_symlink(path).string();
    } else {
      d = "other";
    }
    if (!S_ISLNK(st.st_mode)) d += " mtime " + std::to_string(st.st_mtim.tv_sec);
    out[rel] = d;
  }
  return out;
}

// A source tree with what archives find hard: nesting, an empty and a read-only directory,
// symlinks (relative, absolute, with a long target), hard links, a 150-character name,
// non-ASCII names, and modes other than the default.
void make_tree(const std::string& root) {
  stdfs::create_directories(root + "/src/deep/nested/dir");
  stdfs::create_directories(root + "/empty");
  stdfs::create_directories(root + "/bin");
  stdfs::create_directories(root + "/readonly");
  write_file(root + "/README.md", "# hello\n");
  write_file(root + "/bin/run.sh", "#!/bin/sh\necho run\n", 0755);
  write_file(root + "/src/deep/nested/dir/code.py", "print('deep')\n", 0600);
  std::string binary;
  for (int i = 0; i < 3000; ++i) binary.push_back(static_cast<char>(i * 7));
  write_file(root + "/src/data.bin", binary, 0640);
  write_file(root + "/src/" + std::string(150, 'n'), "long name\n");
  write_file(root + "/\xc3\xbcnic\xc3\xb8" "de.txt", "utf-8 name\n");
  write_file(root + "/readonly/inside.txt", "ro\n", 0444);
  stdfs::create_symlink("src/deep", root + "/link");
  stdfs::create_symlink("/etc/hostname", root + "/abs-link");
  stdfs::create_symlink(std::string(120, 'x') + "/target", root + "/long-link");
  write_file(root + "/hard1", "shared inode\n");
  stdfs::create_hard_link(root + "/hard1", root + "/src/hard2");
  ::chmod((root + "/empty").c_str(), 0700);
  ::chmod((root + "/src/deep").c_str(), 0750);
  ::chmod((root + "/readonly").c_str(), 0555);
  // Fixed times, so that the comparison checks they travel (and not that "now" matches).
  auto set_time = [&](const std::string& rel, time_t t) {
    struct timespec times[2] = {{t, 0}, {t, 0}};
    ::utimensat(AT_FDCWD, (root + "/" + rel).c_str(), times, AT_SYMLINK_NOFOLLOW);
  };
  set_time("README.md", 1'600'000'000);
  set_time("bin/run.sh", 1'500'000'000);
  set_time("src/deep/nested/dir", 1'400'000'000);
  set_time("src/deep/nested", 1'400'000'001);
  set_time("readonly", 1'400'000'002);
}

void upload_file(const std::string& socket, const std::string& target, const std::string& local) {
  std::ifstream in(local, std::ios::binary);
  auto size = static_cast<long long>(stdfs::file_size(local));
  raw_connection c(socket);
  c.send_head("PUT", target, size);
  std::vector<char> buf(64 * 1024);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) c.send({buf.data(), static_cast<std::size_t>(in.gcount())});
  }
  auto res = c.read_response();
  INFO(res.body);
  REQUIRE(res.status == 200);
}

raw_response put_archive_to(const std::string& socket, const std::string& target, std::string_view tar) {
  raw_connection c(socket);
  c.send_head("PUT", target, static_cast<long long>(tar.size()));
  c.send(tar);
  return c.read_response();
}

raw_response put_archive(const std::string& socket, const std::string& dir, std::string_view tar) {
  return put_archive_to(socket, "/files/archive?path=" + url_encode(dir), tar);
}

raw_response get_archive_to(const std::string& socket, const std::string& path, const std::string& local) {
  std::ofstream out(local, std::ios::binary);
  raw_connection c(socket);
  c.send_head("GET", "/files/archive?path=" + url_encode(path), 0);
  return c.read_response([&](const char* data, std::size_t n) { out.write(data, static_cast<std::streamsize>(n)); });
}

bool have_tool(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

int run(const std::string& command) { return std::system(command.c_str()); }

// A hand-made ustar member: archives that no well-behaved tool would write.
std::string member(const std::string& name, char type, std::string_view data = {}, const std::string& link = {},
                   unsigned mode = 0644) {
  char h[512] = {};
  std::memcpy(h, name.data(), std::min<std::size_t>(name.size(), 100));
  std::snprintf(h + 100, 8, "%07o", mode);
  std::snprintf(h + 108, 8, "%07o", 0u);
  std::snprintf(h + 116, 8, "%07o", 0u);
  std::snprintf(h + 124, 12, "%011zo", data.size());
  std::snprintf(h + 136, 12, "%011o", 1'600'000'000u);
  h[156] = type;
  std::memcpy(h + 157, link.data(), std::min<std::size_t>(link.size(), 100));
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  std::string out(h, 512);
  out += data;
  out.append((512 - data.size() % 512) % 512, '\0');
  return out;
}
const std::string end_marker(1024, '\0');

}  // namespace

TEST_CASE("archives: a tree survives GET then PUT through the agent", "[fs][tar]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();
  std::string src = dir / "src";
  make_tree(src);
  auto expected = describe_tree(src);
  REQUIRE(expected.size() == 19);

  auto got = get_archive_to(sock, src, dir / "tree.tar");
  REQUIRE(got.status == 200);
  CHECK(got.complete);
  CHECK(got.headers["content-type"] == "application/x-tar");
  CHECK(got.headers["transfer-encoding"] == "chunked");

  SECTION("extracted by the agent into a new directory") {
    upload_file(sock, "/files/archive?path=" + url_encode(dir / "dst/sub"), dir / "tree.tar");
    CHECK(describe_tree(dir / "dst/sub") == expected);
  }

  SECTION("the agent's archive is one GNU tar reads") {
    if (!have_tool("tar")) return testing::missing_prerequisite("tar is not installed");
    stdfs::create_directories(dir / "by-gnu");
    REQUIRE(run("tar -xpf " + dir / "tree.tar" + " -C " + dir / "by-gnu") == 0);
    CHECK(describe_tree(dir / "by-gnu") == expected);
  }

  SECTION("GNU tar's formats are extracted the same") {
    if (!have_tool("tar")) return testing::missing_prerequisite("tar is not installed");
    for (std::string format : {"gnu", "posix", "oldgnu"}) {
      INFO("format " << format);
      std::string archive = dir / ("gnu-" + format + ".tar");
      REQUIRE(run("tar --format=" + format + " -cf " + archive + " -C " + src + " .") == 0);
      std::string out = dir / ("from-" + format);
      upload_file(sock, "/files/archive?path=" + url_encode(out), archive);
      CHECK(describe_tree(out) == expected);
    }
  }

  SECTION("Python's tarfile formats are extracted the same") {
    if (!have_tool("python3")) return testing::missing_prerequisite("python3 is not installed");
    for (std::string format : {"PAX_FORMAT", "GNU_FORMAT"}) {
      INFO("format " << format);
      std::string archive = dir / ("py-" + format + ".tar");
      REQUIRE(run("python3 -c \"import tarfile,sys; t=tarfile.open(sys.argv[1],'w',format=tarfile." + format +
                  "); t.add(sys.argv[2], arcname='.'); t.close()\" " + archive + " " + src) == 0);
      std::string out = dir / ("py-" + format);
      upload_file(sock, "/files/archive?path=" + url_encode(out), archive);
      CHECK(describe_tree(out) == expected);
    }
  }

  // The read-only directory would stop temp_dir from cleaning up as a non-root user.
  for (const auto& e : stdfs::recursive_directory_iterator(dir.path()))
    if (e.is_directory() && !e.is_symlink()) ::chmod(e.path().c_str(), 0755);
}

TEST_CASE("archives: one file, missing paths, and bodies that are not plain tar", "[fs][tar]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();

  SECTION("a single file is archived under its base name") {
    write_file(dir / "one.txt", "just one\n", 0600);
    auto got = get_archive_to(sock, dir / "one.txt", dir / "one.tar");
    REQUIRE(got.status == 200);
    auto put = put_archive(sock, dir / "out", read_file(dir / "one.tar"));
    REQUIRE(put.status == 200);
    json j = json::parse(put.body);
    CHECK(j["entries"] == 1);
    CHECK(j["path"] == dir / "out");
    CHECK(read_file(dir / "out/one.txt") == "just one\n");
    struct stat st {};
    ::stat((dir / "out/one.txt").c_str(), &st);
    CHECK((st.st_mode & 07777) == 0600);
  }

  SECTION("refusals before anything is written") {
    auto missing = get_archive_to(sock, dir / "nope", dir / "x.tar");
    CHECK(missing.status == 404);
    write_file(dir / "file", "f");
    auto onto_file = put_archive(sock, dir / "file", member("a", '0', "a") + end_marker);
    CHECK(onto_file.status == 400);
    auto relative = put_archive(sock, "work", end_marker);
    CHECK(relative.status == 400);
  }

  SECTION("compressed, corrupt and truncated bodies") {
    std::string gz = "\x1f\x8b\x08";
    gz.resize(1024, 'x');
    auto compressed = put_archive(sock, dir / "t1", gz);
    CHECK(compressed.status == 400);
    CHECK(json::parse(compressed.body)["error"]["message"].get<std::string>().find("compressed") !=
          std::string::npos);
    auto garbage = put_archive(sock, dir / "t2", std::string(2048, 'g'));
    CHECK(garbage.status == 400);
    std::string cut = member("big", '0', std::string(5000, 'b'));
    cut.resize(1024);
    auto truncated = put_archive(sock, dir / "t3", cut);
    CHECK(truncated.status == 400);
    CHECK(json::parse(truncated.body)["error"]["message"].get<std::string>().find("ends in the middle") !=
          std::string::npos);
  }

  SECTION("an empty body and a bare end marker extract nothing") {
    CHECK(put_archive(sock, dir / "e1", "").status == 200);
    CHECK(put_archive(sock, dir / "e2", end_marker).status == 200);
    CHECK(stdfs::is_empty(dir / "e2"));
  }

  SECTION("device entries are skipped and listed") {
    std::string tar = member("dev-null", '3') + member("ok.txt", '0', "ok") + end_marker;
    auto put = put_archive(sock, dir / "devs", tar);
    REQUIRE(put.status == 200);
    json j = json::parse(put.body);
    CHECK(j["entries"] == 1);
    CHECK(j["skipped"] == json::array({"dev-null"}));
    CHECK(!stdfs::exists(dir / "devs/dev-null"));
    CHECK(read_file(dir / "devs/ok.txt") == "ok");
  }
}

TEST_CASE("archives: entries that escape the target are refused", "[fs][tar]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();
  std::string target = dir / "jail/target";
  stdfs::create_directories(dir / "outside");

  auto refused = [&](const std::string& tar) {
    auto res = put_archive(sock, target, tar);
    INFO(res.body);
    CHECK(res.status == 400);
    if (res.status == 400) CHECK(json::parse(res.body)["error"]["code"] == "invalid_argument");
  };

  SECTION("a ../ entry") {
    refused(member("../evil", '0', "evil") + end_marker);
    refused(member("ok/../../evil", '0', "evil") + end_marker);
    CHECK(!stdfs::exists(dir / "jail/evil"));
    CHECK(!stdfs::exists(dir / "evil"));
  }

  SECTION("an absolute entry") {
    refused(member(dir / "outside/abs", '0', "evil") + end_marker);
    CHECK(!stdfs::exists(dir / "outside/abs"));
  }

  SECTION("a symlink planted by the archive, then written through") {
    refused(member("escape", '2', {}, dir / "outside") + member("escape/pwned", '0', "evil") + end_marker);
    refused(member("rel", '2', {}, "../../outside") + member("rel/pwned", '0', "evil") + end_marker);
    CHECK(!stdfs::exists(dir / "outside/pwned"));
    // The links themselves are fine: they are only text.
    CHECK(stdfs::is_symlink(target + "/escape"));
  }

  SECTION("a hard link to something outside") {
    write_file(dir / "outside/secret", "secret");
    refused(member("hl", '1', {}, "../../outside/secret") + end_marker);
    refused(member("hl", '1', {}, dir / "outside/secret") + end_marker);
    CHECK(!stdfs::exists(target + "/hl"));
  }

  SECTION("a symlink then a file of the same name replaces the link, not its target") {
    write_file(dir / "outside/victim", "untouched");
    std::string tar = member("f", '2', {}, dir / "outside/victim") + member("f", '0', "new") + end_marker;
    auto res = put_archive(sock, target, tar);
    CHECK(res.status == 200);
    CHECK(read_file(dir / "outside/victim") == "untouched");
    CHECK(!stdfs::is_symlink(target + "/f"));
    CHECK(read_file(target + "/f") == "new");
  }
  CHECK(!stdfs::exists(dir / "outside/pwned"));
  CHECK(!stdfs::exists(dir / "outside/abs"));
}

namespace {

raw_response put_file(const std::string& socket, const std::string& query, std::string_view body) {
  raw_connection c(socket);
  c.send_head("PUT", "/files?" + query, static_cast<long long>(body.size()));
  c.send(body);
  return c.read_response();
}

}  // namespace

TEST_CASE("archives: set-uid and set-gid bits are dropped unless keep_setid=true", "[fs][tar]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();
  // Without CAP_FSETID the kernel itself clears set-gid for a group the owner is not in.
  bool privileged = ::geteuid() == 0;
  const std::string tar = member("suid", '0', "#!/bin/sh\n", {}, 04755) + member("sgid", '0', "y", {}, 02755) +
                          member("both", '0', "z", {}, 06711) + member("sticky", '0', "s", {}, 01755) +
                          member("shared/", '5', {}, {}, 02775) + member("pipe", '6', {}, {}, 04644) + end_marker;

  SECTION("by default") {
    auto res = put_archive(sock, dir / "plain", tar);
    INFO(res.body);
    REQUIRE(res.status == 200);
    CHECK(mode_of(dir / "plain/suid") == 0755);
    CHECK(mode_of(dir / "plain/sgid") == 0755);
    CHECK(mode_of(dir / "plain/both") == 0711);
    CHECK(mode_of(dir / "plain/sticky") == 01755);  // not a privilege: kept
    CHECK(mode_of(dir / "plain/shared") == 0775);
    CHECK(mode_of(dir / "plain/pipe") == 0644);
  }

  SECTION("asked for") {
    auto res = put_archive_to(sock, "/files/archive?keep_setid=true&path=" + url_encode(dir / "kept"), tar);
    INFO(res.body);
    REQUIRE(res.status == 200);
    CHECK(mode_of(dir / "kept/suid") == 04755);
    if (privileged) {
      CHECK(mode_of(dir / "kept/sgid") == 02755);
      CHECK(mode_of(dir / "kept/both") == 06711);
      CHECK(mode_of(dir / "kept/shared") == 02775);
    }
  }

  SECTION("a keep_setid that is not a boolean is refused before anything is written") {
    auto res = put_archive_to(sock, "/files/archive?keep_setid=maybe&path=" + url_encode(dir / "never"), tar);
    CHECK(res.status == 400);
    CHECK(!stdfs::exists(dir / "never"));
  }
}

TEST_CASE("files: a mode with set-uid, set-gid or sticky bits needs keep_setid=true", "[fs]") {
  temp_dir dir;
  agent_binary agent(dir / "agent.sock");
  const std::string& sock = agent.socket();
  for (const char* mode : {"4755", "2755", "1777", "06755", "7777"}) {
    INFO("mode " << mode);
    auto res = put_file(sock, "path=" + url_encode(dir / "f") + "&mode=" + mode, "x");
    CHECK(res.status == 400);
    CHECK_THAT(res.body, Catch::Contains("keep_setid"));
    CHECK(!stdfs::exists(dir / "f"));
  }
  auto plain = put_file(sock, "path=" + url_encode(dir / "plain") + "&mode=0755", "x");
  REQUIRE(plain.status == 201);
  CHECK(mode_of(dir / "plain") == 0755);

  auto kept = put_file(sock, "path=" + url_encode(dir / "kept") + "&mode=4755&keep_setid=true", "x");
  INFO(kept.body);
  REQUIRE(kept.status == 201);
  CHECK(json::parse(kept.body)["mode"] == "4755");
  CHECK(mode_of(dir / "kept") == 04755);

  auto unclear = put_file(sock, "path=" + url_encode(dir / "u") + "&mode=0644&keep_setid=perhaps", "x");
  CHECK(unclear.status == 400);
}
