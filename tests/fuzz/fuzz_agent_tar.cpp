// Attacker: an API client uploading an archive (PUT /files/archive is relayed to the agent), and
// root inside the sandbox, which can write to the agent directly. The agent's tar reader
// (ustar, pax, GNU long names, base-256 numbers) extracts into a target directory and must never
// create, change or link anything outside it, whatever symlinks and hard links the archive
// plants first.
//
// Input: one byte of options (bit 0: keep_setid; the rest: how the body is cut into pieces),
// then the archive. The target is <tmp>/jail/target; <tmp>/outside/victim is what an escape
// would hit. After every input: nothing new beside the target, the victim untouched, no set-id
// bits unless asked, every member name inside the target.

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

#include "fs/tar.hpp"
#include "fs/tar_format.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::agent;
namespace stdfs = std::filesystem;

namespace {

constexpr std::string_view victim_text = "untouched";

struct sandbox_dir {
  std::string root, target, victim;
  sandbox_dir() {
    char tmpl[] = "/tmp/sandfort-fuzz-tar-XXXXXX";
    FUZZ_CHECK(::mkdtemp(tmpl) != nullptr);
    root = tmpl;
    stdfs::create_directories(root + "/jail");
    stdfs::create_directories(root + "/outside");
    victim = root + "/outside/victim";
    std::ofstream(victim) << victim_text;
    ::chmod(victim.c_str(), 0644);
    target = root + "/jail/target";
  }
  ~sandbox_dir() {
    make_removable(root);
    std::error_code ec;
    stdfs::remove_all(root, ec);
  }

  // Read-only directories from the archive (modes are applied) must not stop the cleanup when
  // not running as root.
  static void make_removable(const std::string& dir) {
    ::nftw(
        dir.c_str(),
        [](const char* path, const struct stat* st, int type, FTW*) {
          if (type == FTW_D || type == FTW_DNR) ::chmod(path, (st->st_mode & 07777) | 0700);
          return 0;
        },
        16, FTW_PHYS);
  }

  void reset() {
    std::error_code ec;
    stdfs::remove_all(target, ec);
    if (ec) {
      make_removable(target);
      stdfs::remove_all(target, ec);
    }
    FUZZ_CHECK(!ec);
  }

  std::set<std::string> names(const std::string& dir) const {
    std::set<std::string> out;
    for (const auto& e : stdfs::directory_iterator(dir)) out.insert(e.path().filename().string());
    return out;
  }

  void check_contained(bool keep_setid) const {
    FUZZ_CHECK((names(root) == std::set<std::string>{"jail", "outside"}));
    auto jail = names(root + "/jail");
    FUZZ_CHECK(jail.empty() || jail == std::set<std::string>{"target"});
    FUZZ_CHECK(names(root + "/outside") == std::set<std::string>{"victim"});
    struct stat st {};
    FUZZ_CHECK(::lstat(victim.c_str(), &st) == 0);
    FUZZ_CHECK(S_ISREG(st.st_mode) && st.st_nlink == 1 && (st.st_mode & 07777) == 0644);
    FUZZ_CHECK(st.st_size == static_cast<off_t>(victim_text.size()));
    std::ifstream in(victim);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    FUZZ_CHECK(content == victim_text);
    if (keep_setid || !stdfs::exists(target)) return;
    std::error_code ec;
    for (auto it = stdfs::recursive_directory_iterator(target, stdfs::directory_options::skip_permission_denied, ec);
         !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
      struct stat est {};
      if (::lstat(it->path().c_str(), &est) != 0) continue;
      FUZZ_CHECK((est.st_mode & (S_ISUID | S_ISGID)) == 0);
    }
  }
};

sandbox_dir& dir() {
  static sandbox_dir d;
  return d;
}

void check_components(std::string_view name) {
  auto parts = fs::detail::member_components(name);
  if (!parts) return;
  FUZZ_CHECK(!name.starts_with('/'));
  for (const auto& p : *parts) FUZZ_CHECK(!p.empty() && p != "." && p != ".." && p.find('/') == std::string::npos);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  bool keep_setid = data[0] & 1;
  std::size_t piece = (data[0] >> 1) == 0 ? size : static_cast<std::size_t>(data[0] >> 1) * 7;
  const char* archive = reinterpret_cast<const char*>(data) + 1;
  std::size_t length = size - 1;

  check_components(std::string_view(archive, std::min<std::size_t>(length, 256)));
  if (length >= fs::tar::block) {
    (void)fs::tar::checksum_ok(archive);
    for (auto f : {fs::tar::size_field, fs::tar::mtime, fs::tar::mode, fs::tar::uid})
      (void)fs::tar::number(archive, f);
    (void)fs::tar::for_each_pax_record(std::string_view(archive, length), [](std::string_view, std::string_view) {});
  }

  auto& d = dir();
  d.reset();
  {
    auto ex = fs::tar_extractor::open(d.target, fs::extract_options{keep_setid});
    FUZZ_CHECK(ex.ok());
    bool failed = false;
    for (std::size_t at = 0; at < length && !failed; at += piece)
      failed = !ex->feed(archive + at, std::min(piece, length - at)).ok();
    if (!failed) {
      auto summary = ex->finish();
      if (summary) FUZZ_CHECK(summary->skipped.size() <= summary->skipped_count);
    }
  }
  d.check_contained(keep_setid);
  return 0;
}
