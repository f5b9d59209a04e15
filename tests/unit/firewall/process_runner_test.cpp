// process_runner: the real programs behind host_firewall.

#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include "sandfort/firewall/host_firewall.hpp"

using namespace sandfort;
using namespace sandfort::firewall;

namespace {

// Sets an environment variable for the scope of a test, then puts the old value back.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class temp_dir {
 public:
  temp_dir() {
    char tmpl[] = "/tmp/sffw-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("process_runner returns the exit status and stdout and stderr together") {
  process_runner runner;
  std::string output = "stale";
  auto status = runner.run({"sh", "-c", "echo out; echo err >&2; exit 3"}, &output);
  REQUIRE(status);
  CHECK(*status == 3);
  CHECK(output == "out\nerr\n");

  auto quiet = runner.run({"sh", "-c", "echo nobody listens; exit 0"}, nullptr);
  REQUIRE(quiet);
  CHECK(*quiet == 0);
}

TEST_CASE("process_runner: no shell, stdin at EOF, death by signal as 128+N") {
  process_runner runner;
  std::string output;
  // One argument stays one argument: nothing is split or expanded.
  auto echoed = runner.run({"sh", "-c", "printf '%s|' \"$@\"", "sh", "a b", "$HOME", ";"}, &output);
  REQUIRE(echoed);
  CHECK(output == "a b|$HOME|;|");

  auto started = std::chrono::steady_clock::now();
  auto cat = runner.run({"cat"}, &output);
  REQUIRE(cat);
  CHECK(*cat == 0);
  CHECK(output.empty());
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));

  auto killed = runner.run({"sh", "-c", "kill -9 $$"}, &output);
  REQUIRE(killed);
  CHECK(*killed == 128 + 9);
}

TEST_CASE("process_runner finds programs in the system directories, not in PATH") {
  scoped_env no_sbin("PATH", "/nonexistent");
  process_runner runner;
  std::string output;
  auto status = runner.run({"sh", "-c", "echo found"}, &output);
  REQUIRE(status);
  CHECK(output == "found\n");

  SECTION("its own list of directories, searched in order") {
    temp_dir dir;
    std::string tool = dir.path() + "/sftool";
    std::ofstream(tool) << "#!/bin/sh\necho \"tool $1\"\n";
    ::chmod(tool.c_str(), 0755);
    process_runner custom({"/nonexistent-dir", dir.path()});
    auto r = custom.run({"sftool", "x"}, &output);
    REQUIRE(r);
    CHECK(output == "tool x\n");
  }

  SECTION("a path is run as given") {
    auto r = runner.run({"/bin/sh", "-c", "exit 5"}, &output);
    REQUIRE(r);
    CHECK(*r == 5);
  }

  SECTION("a program that is nowhere is an error, not an exit status") {
    auto r = runner.run({"sandfort-no-such-tool"}, &output);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::unavailable);
    CHECK_THAT(r.err().message, Catch::Contains("sandfort-no-such-tool"));
    process_runner nowhere(std::vector<std::string>{});
    CHECK_FALSE(nowhere.run({"sh", "-c", "true"}, &output));
    CHECK_FALSE(runner.run({}, &output));
  }
}
