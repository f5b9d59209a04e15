// The tar code on its own: header fields, member names, and the extractor's state machine
// fed in pieces of every awkward size (a body arrives however the network cuts it).

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "fs/tar.hpp"
#include "fs/tar_format.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::agent;
using namespace sandfort::agent::test;
namespace stdfs = std::filesystem;

namespace {

std::string whole_archive(const std::string& path) {
  auto writer = fs::tar_writer::open(path);
  REQUIRE(writer.ok());
  std::string out;
  char buf[3000];  // not a multiple of 512, on purpose
  while (true) {
    auto n = writer->read(buf, sizeof buf);
    REQUIRE(n.ok());
    if (*n == 0) break;
    out.append(buf, *n);
  }
  return out;
}

std::map<std::string, std::string> listing(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = stdfs::recursive_directory_iterator(root); it != stdfs::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().string().substr(root.size() + 1);
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    std::string d = std::to_string(st.st_mode);
    if (S_ISREG(st.st_mode)) d += ":" + read_file(it->path().string());
    if (S_ISLNK(st.st_mode)) d += "->" + stdfs::read_symlink(it->path()).string();
    out[rel] = d;
  }
  return out;
}

}  // namespace

TEST_CASE("tar: numeric fields, octal or base-256", "[tar]") {
  char h[512] = {};
  fs::tar::put_number(h, fs::tar::size_field, 0777);
  CHECK(std::string(h + 124, 11) == "00000000777");
  CHECK(fs::tar::number(h, fs::tar::size_field) == 0777u);

  std::uint64_t big = 20ull << 30;  // 20 GiB: past the 8 GiB octal limit
  CHECK_FALSE(fs::tar::fits_octal(fs::tar::size_field, big));
  fs::tar::put_number(h, fs::tar::size_field, big);
  CHECK(static_cast<unsigned char>(h[124]) == 0x80);
  CHECK(fs::tar::number(h, fs::tar::size_field) == big);

  std::memcpy(h + 100, "  755 \0\0", 8);  // leading spaces and a trailing space, as old tars write
  CHECK(fs::tar::number(h, fs::tar::mode) == 0755u);
  std::memcpy(h + 100, "0000x75\0", 8);
  CHECK_FALSE(fs::tar::number(h, fs::tar::mode).has_value());
}

TEST_CASE("tar: pax records carry their own length", "[tar]") {
  std::string rec;
  fs::tar::append_pax_record(rec, "path", std::string(93, 'a'));  // the length crosses 99 → 100
  std::string expected_len = std::to_string(rec.size());
  CHECK(rec.substr(0, expected_len.size()) == expected_len);
  std::string key, value;
  CHECK(fs::tar::for_each_pax_record(rec, [&](std::string_view k, std::string_view v) {
    key = k;
    value = v;
  }));
  CHECK(key == "path");
  CHECK(value == std::string(93, 'a'));
  CHECK_FALSE(fs::tar::for_each_pax_record("13 path=abc\n", [](auto, auto) {}));  // wrong length
  CHECK_FALSE(fs::tar::for_each_pax_record("garbage", [](auto, auto) {}));
}

TEST_CASE("tar: member names stay inside the target", "[tar]") {
  using fs::detail::member_components;
  CHECK(*member_components("a/b/c") == std::vector<std::string>{"a", "b", "c"});
  CHECK(*member_components("./a//b/./") == std::vector<std::string>{"a", "b"});
  CHECK(member_components("./")->empty());
  CHECK(*member_components("a..b/..c") == std::vector<std::string>{"a..b", "..c"});
  CHECK_FALSE(member_components("../x").ok());
  CHECK_FALSE(member_components("a/../../x").ok());
  CHECK_FALSE(member_components("a/..").ok());
  CHECK_FALSE(member_components("/etc/passwd").ok());
  CHECK_FALSE(member_components("").ok());
}

TEST_CASE("tar: the extractor takes an archive in pieces of any size", "[tar]") {
  temp_dir dir;
  std::string src = dir / "src";
  stdfs::create_directories(src + "/a/b");
  write_file(src + "/a/b/f.txt", std::string(1500, 'f'));
  write_file(src + "/a/" + std::string(120, 'L'), "long");
  write_file(src + "/empty", "");
  stdfs::create_symlink("a/b/f.txt", src + "/ln");
  stdfs::create_symlink(std::string(150, 't'), src + "/long-target");
  std::string archive = whole_archive(src);
  CHECK(archive.size() % 512 == 0);
  auto expected = listing(src);

  std::mt19937 rng(7);  // fixed: the same cuts every run
  for (int round = 0; round < 6; ++round) {
    INFO("round " << round);
    std::string out = dir / ("out" + std::to_string(round));
    auto ex = fs::tar_extractor::open(out);
    REQUIRE(ex.ok());
    std::size_t at = 0;
    while (at < archive.size()) {
      std::size_t piece = round == 0 ? 1 : round == 1 ? 511 : round == 2 ? 513 : 1 + rng() % 2000;
      piece = std::min(piece, archive.size() - at);
      REQUIRE(ex->feed(archive.data() + at, piece).ok());
      at += piece;
    }
    auto summary = ex->finish();
    REQUIRE(summary.ok());
    CHECK(summary->entries == expected.size());
    CHECK(listing(out) == expected);
  }
}

TEST_CASE("tar: a cut-off archive is an error wherever it is cut, never a crash", "[tar]") {
  temp_dir dir;
  std::string src = dir / "src";
  stdfs::create_directories(src + "/d");
  write_file(src + "/d/x", std::string(700, 'x'));
  write_file(src + "/" + std::string(130, 'p'), "pax");
  std::string archive = whole_archive(src);
  // Everything up to the end-of-archive marker is one of: complete entries, or a cut.
  std::size_t content_end = archive.size() - 1024;
  for (std::size_t cut = 1; cut < content_end; cut += 97) {
    INFO("cut at " << cut);
    std::string out = dir / "cut";
    stdfs::remove_all(out);
    auto ex = fs::tar_extractor::open(out);
    REQUIRE(ex.ok());
    REQUIRE(ex->feed(archive.data(), cut).ok());
    auto summary = ex->finish();
    // A cut exactly between entries reads as a (short) complete archive; any other is refused.
    if (summary.ok()) CHECK(cut % 512 == 0);
    else CHECK(summary.err().code == errc::invalid_argument);
  }

  // Random garbage after a valid header block is refused, not trusted.
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    std::string junk(1024, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    auto ex = fs::tar_extractor::open(dir / "junk");
    REQUIRE(ex.ok());
    auto fed = ex->feed(junk.data(), junk.size());
    CHECK_FALSE(fed.ok());
  }
}
