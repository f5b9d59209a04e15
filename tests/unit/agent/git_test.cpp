// The Git capability: request validation, the argv and environment built for each operation,
// the porcelain v2 and branch parsers, and the credential hand-over (a memfd on descriptor 3
// read by the real agent binary in askpass mode), with the host's git for a few real runs.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "git/credentials.hpp"
#include "git/porcelain.hpp"
#include "git/request.hpp"
#include "git/run.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::agent;
using namespace sandfort::agent::git;
using sandfort::agent::test::temp_dir;
using sandfort::testing::run_coroutine;
using Args = std::vector<std::string>;

namespace {

std::string rejection(op o, const std::string& body) {
  auto r = parse_request(o, body);
  if (r.ok()) return "(accepted)";
  CHECK(r.err().code == errc::invalid_argument);
  return r.err().message;
}

request accepted(op o, const std::string& body) {
  auto r = parse_request(o, body);
  INFO(body);
  REQUIRE(r.ok());
  return *r;
}

// The argv after the common "git -c credential.helper=".
Args tail(const command& c) {
  REQUIRE(c.argv.size() >= 3);
  return Args(c.argv.begin() + 3, c.argv.end());
}

exec_result run_sync(const command& c, const std::optional<credentials>& creds = std::nullopt) {
  run_options options;
  options.timeout = std::chrono::seconds(30);
  auto r = run_coroutine(run_git(c, creds, options));
  REQUIRE(r.ok());
  return *r;
}

command plain(Args argv, std::string cwd = "") {
  command c;
  c.argv = std::move(argv);
  c.cwd = std::move(cwd);
  return c;
}

}  // namespace

TEST_CASE("git operations by name") {
  CHECK(parse_op("clone") == op::clone);
  CHECK(parse_op("status") == op::status);
  CHECK_FALSE(parse_op("fetch"));
  CHECK_FALSE(parse_op("Clone"));
  CHECK(to_string(op::branches) == "branches");
  CHECK(uses_network(op::push));
  CHECK_FALSE(uses_network(op::commit));
}

TEST_CASE("git requests are validated field by field") {
  CHECK(rejection(op::status, "{not json").rfind("request body is not valid JSON", 0) == 0);
  CHECK(rejection(op::status, "[1]") == "request body must be a JSON object");
  CHECK(rejection(op::status, "{}") == "path is required");
  CHECK(rejection(op::status, R"({"path":"repo"})") == "path must be absolute");
  CHECK(rejection(op::status, R"({"path":""})") == "path must not be empty");
  CHECK(rejection(op::status, R"({"path":7})") == "path must be a string");
  CHECK(rejection(op::status, R"({"path":"/r","bogus":1})") == "unknown field 'bogus'");
  CHECK(rejection(op::status, R"({"path":"/r","url":"http://x/r"})") == "url does not apply to status");
  CHECK(rejection(op::add, R"({"path":"/r","password":"p"})") == "password does not apply to add");
  CHECK(rejection(op::clone, R"({"path":"/r"})") == "url is required");
  CHECK(rejection(op::clone, R"({"path":"/r","url":"--upload-pack=sh"})") == "url must not start with '-'");
  CHECK(rejection(op::clone, R"({"path":"/r","url":"https://u:tok@h/r.git"})")
            .rfind("url must not carry a password", 0) == 0);
  CHECK(rejection(op::clone, R"({"path":"/r","url":"http://h/r","depth":0})") == "depth must be an integer of at least 1");
  CHECK(rejection(op::clone, R"({"path":"/r","url":"http://h/r","depth":"1"})") ==
        "depth must be an integer of at least 1");
  CHECK(rejection(op::clone, R"({"path":"/r","url":"http://h/r","branch":"-b"})") == "branch must not start with '-'");
  CHECK(rejection(op::clone, R"({"path":"/r","url":"http://h/r","branch":"a b"})") == "branch must not contain whitespace");
  CHECK(rejection(op::commit, R"({"path":"/r"})") == "message is required");
  CHECK(rejection(op::commit, R"({"path":"/r","message":""})") == "message must be a non-empty string");
  CHECK(rejection(op::commit, R"({"path":"/r","message":"m","author":"nobody"})") ==
        "author must be \"Name <email>\" or {\"name\", \"email\"}");
  CHECK(rejection(op::commit, R"({"path":"/r","message":"m","author":{"name":"A"}})") == "author needs both name and email");
  CHECK(rejection(op::commit, R"({"path":"/r","message":"m","author":{"name":"A","email":"a@x","x":1}})") ==
        "author: unknown field 'x'");
  CHECK(rejection(op::add, R"({"path":"/r","files":[]})") == "files must be a non-empty array of strings");
  CHECK(rejection(op::add, R"({"path":"/r","files":["a",2]})") == "files[1] must be a non-empty string");
  CHECK(rejection(op::checkout, R"({"path":"/r"})") == "branch is required");
  CHECK(rejection(op::checkout, R"({"path":"/r","branch":"b","create":"yes"})") == "create must be true or false");
  CHECK(rejection(op::status, R"({"path":"/r","timeout_s":0})") == "timeout_s must be an integer between 1 and 2000000");
}

TEST_CASE("credentials: a password or a token, never echoed in a message") {
  CHECK(rejection(op::push, R"({"path":"/r","username":"u"})") == "username needs a password or token");
  CHECK(rejection(op::push, R"({"path":"/r","password":"s3cret","token":"t0ken"})") == "give password or token, not both");
  std::string msg = rejection(op::push, R"({"path":"/r","password":"s3cret\nx"})");
  CHECK(msg == "password must not contain NUL bytes or line breaks");
  CHECK(msg.find("s3cret") == std::string::npos);
  CHECK(rejection(op::push, R"({"path":"/r","token":""})") == "token must be a non-empty string");

  auto r = accepted(op::push, R"({"path":"/r","username":"alice","password":"pw"})");
  REQUIRE(r.creds);
  CHECK(r.creds->username == "alice");
  CHECK(r.creds->password == "pw");
  r = accepted(op::clone, R"({"path":"/r","url":"https://h/r.git","token":"tok"})");
  REQUIRE(r.creds);
  CHECK(r.creds->username == "git");
  CHECK(r.creds->password == "tok");
  CHECK_FALSE(accepted(op::pull, R"({"path":"/r"})").creds);
  // A user name in the URL is fine (no secret in it).
  CHECK(accepted(op::clone, R"({"path":"/r","url":"https://alice@h/r.git"})").url == "https://alice@h/r.git");
}

TEST_CASE("authors as \"Name <email>\" or an object") {
  auto who = parse_identity("Ada Lovelace <ada@example.com>");
  REQUIRE(who);
  CHECK(who->name == "Ada Lovelace");
  CHECK(who->email == "ada@example.com");
  CHECK_FALSE(parse_identity("Ada"));
  CHECK_FALSE(parse_identity("<ada@example.com>"));
  CHECK_FALSE(parse_identity("Ada <>"));
  auto r = accepted(op::commit, R"({"path":"/r","message":"m","author":{"name":"Ada","email":"ada@x"}})");
  REQUIRE(r.author);
  CHECK(r.author->name == "Ada");
}

TEST_CASE("the argv and environment of each operation") {
  const std::string askpass = "/.sandfort/agent";
  auto clone = build_command(
      accepted(op::clone, R"({"path":"/work/r","url":"http://h/r.git","branch":"dev","depth":1,"token":"t"})"), askpass);
  CHECK(Args(clone.argv.begin(), clone.argv.begin() + 3) == Args{"git", "-c", "credential.helper="});
  CHECK(tail(clone) == Args{"clone", "--branch", "dev", "--depth", "1", "--", "http://h/r.git", "/work/r"});
  CHECK(clone.cwd.empty());
  CHECK(clone.env.at("GIT_TERMINAL_PROMPT") == "0");
  CHECK(clone.env.at("GIT_ASKPASS") == askpass);
  // The secret is in no argument and no variable.
  for (const auto& a : clone.argv) CHECK(a != "t");
  for (const auto& kv : clone.env) CHECK(kv.second != "t");

  auto pull = build_command(accepted(op::pull, R"({"path":"/r"})"), askpass);
  CHECK(tail(pull) == Args{"pull", "--no-edit", "--no-rebase"});
  CHECK(pull.cwd == "/r");
  CHECK(tail(build_command(accepted(op::pull, R"({"path":"/r","branch":"main","rebase":true})"), askpass)) ==
        Args{"pull", "--no-edit", "--rebase", "origin", "main"});

  CHECK(tail(build_command(accepted(op::push, R"({"path":"/r"})"), askpass)) ==
        Args{"push", "--set-upstream", "origin", "HEAD"});
  CHECK(tail(build_command(accepted(op::push, R"({"path":"/r","remote":"up","branch":"feat"})"), askpass)) ==
        Args{"push", "--set-upstream", "up", "feat"});

  CHECK(tail(build_command(accepted(op::add, R"({"path":"/r"})"), askpass)) == Args{"add", "--all", "--"});
  CHECK(tail(build_command(accepted(op::add, R"({"path":"/r","files":["-x","a b"]})"), askpass)) ==
        Args{"add", "--", "-x", "a b"});

  auto commit = build_command(
      accepted(op::commit, R"({"path":"/r","message":"fix: it","author":"Ada <ada@x>","files":["f"]})"), askpass);
  CHECK(tail(commit) == Args{"commit", "--message", "fix: it", "--", "f"});
  CHECK(commit.env.at("GIT_AUTHOR_NAME") == "Ada");
  CHECK(commit.env.at("GIT_AUTHOR_EMAIL") == "ada@x");
  CHECK(commit.env.at("GIT_COMMITTER_NAME") == "Ada");
  CHECK(commit.env.at("GIT_COMMITTER_EMAIL") == "ada@x");
  CHECK(build_command(accepted(op::commit, R"({"path":"/r","message":"m"})"), askpass).env.count("GIT_AUTHOR_NAME") == 0);

  CHECK(tail(build_command(accepted(op::checkout, R"({"path":"/r","branch":"b"})"), askpass)) ==
        Args{"checkout", "b", "--"});
  CHECK(tail(build_command(accepted(op::checkout, R"({"path":"/r","branch":"b","create":true})"), askpass)) ==
        Args{"checkout", "-b", "b"});
  CHECK(tail(build_command(accepted(op::status, R"({"path":"/r"})"), askpass)) ==
        Args{"status", "--porcelain=v2", "--branch", "-z"});
  CHECK(tail(build_command(accepted(op::branches, R"({"path":"/r"})"), askpass))[0] == "for-each-ref");
}

TEST_CASE("porcelain v2 with branch headers, every kind of entry") {
  using namespace std::string_literals;
  std::string z =
      "# branch.oid 1234567890abcdef1234567890abcdef12345678\0"
      "# branch.head feature/x\0"
      "# branch.upstream origin/feature/x\0"
      "# branch.ab +3 -1\0"
      "1 .M N... 100644 100644 100644 aaaa aaaa src/main.c\0"
      "1 A. N... 000000 100644 100644 0000 bbbb new file.txt\0"
      "2 R. N... 100644 100644 100644 cccc cccc R100 renamed.txt\0old name.txt\0"
      "u UU N... 100644 100644 100644 100644 d1 d2 d3 conflict.c\0"
      "? untracked dir/\0"
      "! build/\0"s;
  auto st = parse_status(z);
  CHECK(st.branch == std::optional<std::string>("feature/x"));
  CHECK(st.commit == std::optional<std::string>("1234567890abcdef1234567890abcdef12345678"));
  CHECK(st.upstream == std::optional<std::string>("origin/feature/x"));
  CHECK(st.ahead == 3);
  CHECK(st.behind == 1);
  REQUIRE(st.files.size() == 6);
  CHECK(st.files[0].path == "src/main.c");
  CHECK(st.files[0].index == '.');
  CHECK(st.files[0].worktree == 'M');
  CHECK(st.files[0].kind == "changed");
  CHECK(st.files[1].path == "new file.txt");
  CHECK(st.files[1].index == 'A');
  CHECK(st.files[2].kind == "renamed");
  CHECK(st.files[2].path == "renamed.txt");
  CHECK(st.files[2].orig_path == "old name.txt");
  CHECK(st.files[3].kind == "unmerged");
  CHECK(st.files[3].path == "conflict.c");
  CHECK(st.files[3].index == 'U');
  CHECK(st.files[4].kind == "untracked");
  CHECK(st.files[4].path == "untracked dir/");
  CHECK(st.files[4].index == '?');
  CHECK(st.files[5].kind == "ignored");

  auto j = to_json(st);
  CHECK(j["branch"] == "feature/x");
  CHECK(j["ahead"] == 3);
  CHECK(j["files"][1]["staged"] == true);
  CHECK(j["files"][0]["staged"] == false);
  CHECK(j["files"][0]["worktree"] == "M");
  CHECK(j["files"][2]["orig_path"] == "old name.txt");
  CHECK_FALSE(j["files"][0].contains("orig_path"));
}

TEST_CASE("porcelain v2: a new repository, a detached head, garbage") {
  using namespace std::string_literals;
  auto fresh = parse_status("# branch.oid (initial)\0# branch.head main\0? a\0"s);
  CHECK(fresh.branch == std::optional<std::string>("main"));
  CHECK_FALSE(fresh.commit);
  CHECK_FALSE(fresh.upstream);
  CHECK(fresh.ahead == 0);
  CHECK(fresh.files.size() == 1);
  auto j = to_json(fresh);
  CHECK(j["commit"].is_null());
  CHECK(j["upstream"].is_null());

  auto detached = parse_status("# branch.oid abc\0# branch.head (detached)\0"s);
  CHECK_FALSE(detached.branch);
  CHECK(parse_status("").files.empty());
  CHECK(parse_status("garbage\0x\0# \0 1\0"s).files.empty());
  CHECK(parse_status("1 .M N... 100644\0"s).files.empty());  // truncated record
}

TEST_CASE("branches: local ones with their upstream, remote ones by name") {
  using namespace std::string_literals;
  std::string listing =
      " \0refs/heads/dev\0aaa\0\n"
      "*\0refs/heads/main\0bbb\0origin/main\n"
      " \0refs/remotes/origin/HEAD\0bbb\0\n"
      " \0refs/remotes/origin/main\0bbb\0\n"s;
  auto b = parse_branches(listing);
  REQUIRE(b.size() == 3);
  auto j = branches_json(b);
  CHECK(j["current"] == "main");
  REQUIRE(j["branches"].size() == 2);
  CHECK(j["branches"][0]["name"] == "dev");
  CHECK(j["branches"][0]["upstream"].is_null());
  CHECK(j["branches"][1]["upstream"] == "origin/main");
  CHECK(j["branches"][1]["current"] == true);
  CHECK(j["remote_branches"] == nlohmann::json::array({"origin/main"}));
  CHECK(branches_json(parse_branches(""))["current"].is_null());
}

TEST_CASE("askpass mode is recognised by git's prompt only") {
  auto check = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return is_askpass_call(static_cast<int>(args.size()), argv.data());
  };
  CHECK(check({"agent", "Username for 'https://h': "}));
  CHECK(check({"agent", "Password for 'https://u@h': "}));
  CHECK_FALSE(check({"agent", "--version"}));
  CHECK_FALSE(check({"agent"}));
  CHECK_FALSE(check({"agent", "--socket", "/x"}));
  CHECK_FALSE(check({"agent", "Username for 'x': ", "more"}));
}

TEST_CASE("the credentials' memfd: sealed, no path, and read back by the agent as askpass") {
  auto fd = credential_fd({"alice", "t0k3n-s3cret"});
  REQUIRE(fd.ok());
  CHECK(::write(fd->get(), "x", 1) == -1);  // sealed
  CHECK((::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC) != 0);
  char link[256] = {};
  REQUIRE(::readlink(("/proc/self/fd/" + std::to_string(fd->get())).c_str(), link, sizeof link - 1) > 0);
  CHECK(std::string(link).rfind("/memfd:sandfort-git-credentials", 0) == 0);

  credentials creds{"alice", "t0k3n-s3cret"};
  auto user = run_sync(plain({SANDFORT_AGENT_PATH, "Username for 'http://h': "}), creds);
  CHECK(user.exit_code == 0);
  CHECK(user.stdout_data == "alice\n");
  auto pass = run_sync(plain({SANDFORT_AGENT_PATH, "Password for 'http://alice@h': "}), creds);
  CHECK(pass.exit_code == 0);
  CHECK(pass.stdout_data == "t0k3n-s3cret\n");
  // Without credentials askpass answers nothing and fails: git gives up instead of waiting.
  auto none = run_sync(plain({SANDFORT_AGENT_PATH, "Password for 'http://alice@h': "}));
  CHECK(none.exit_code == 1);
  CHECK(none.stdout_data.empty());
  CHECK(none.stderr_data.find("no credentials were given") != std::string::npos);
  // The child sees descriptor 3 only when there are credentials, and nothing else above 2.
  auto fds = run_sync(plain({"/bin/sh", "-c", "ls /proc/self/fd | sort -n | tr '\\n' ' '"}), creds);
  CHECK(fds.stdout_data.rfind("0 1 2 3 ", 0) == 0);
  auto nofds = run_sync(plain({"/bin/sh", "-c", "test -e /proc/self/fd/3 && echo open || echo closed"}));
  CHECK(nofds.stdout_data == "closed\n");
}

TEST_CASE("real git on the host: add, commit with an author, status and branches parsed") {
  temp_dir dir;
  const std::string repo = dir / "repo";
  auto init = run_sync(plain({"git", "init", "-q", "-b", "main", repo}));
  REQUIRE(init.exit_code == 0);
  auto sh = [&](const std::string& script) { return run_sync(plain({"/bin/sh", "-c", script}, repo)); };
  sh("echo one > a.txt && mkdir -p d && echo two > 'd/b c.txt'");

  auto st_cmd = build_command(accepted(op::status, R"({"path":")" + repo + R"("})"), SANDFORT_AGENT_PATH);
  auto st = run_sync(st_cmd);
  REQUIRE(st.exit_code == 0);
  auto parsed = parse_status(st.stdout_data);
  CHECK(parsed.branch == std::optional<std::string>("main"));
  CHECK_FALSE(parsed.commit);
  REQUIRE(parsed.files.size() == 2);
  CHECK(parsed.files[0].kind == "untracked");

  auto add = run_sync(build_command(accepted(op::add, R"({"path":")" + repo + R"("})"), SANDFORT_AGENT_PATH));
  REQUIRE(add.exit_code == 0);
  parsed = parse_status(run_sync(st_cmd).stdout_data);
  REQUIRE(parsed.files.size() == 2);
  CHECK(parsed.files[0].path == "a.txt");
  CHECK(parsed.files[0].index == 'A');
  CHECK(parsed.files[1].path == "d/b c.txt");

  auto commit = run_sync(build_command(
      accepted(op::commit, R"({"path":")" + repo + R"(","message":"first","author":"Ada <ada@example.com>"})"),
      SANDFORT_AGENT_PATH));
  INFO(commit.stderr_data);
  REQUIRE(commit.exit_code == 0);
  CHECK(sh("git log -1 --format='%an <%ae> / %cn'").stdout_data == "Ada <ada@example.com> / Ada\n");

  auto co = run_sync(build_command(accepted(op::checkout, R"({"path":")" + repo + R"(","branch":"feat","create":true})"),
                                   SANDFORT_AGENT_PATH));
  REQUIRE(co.exit_code == 0);
  auto br = run_sync(build_command(accepted(op::branches, R"({"path":")" + repo + R"("})"), SANDFORT_AGENT_PATH));
  REQUIRE(br.exit_code == 0);
  auto j = branches_json(parse_branches(br.stdout_data));
  CHECK(j["current"] == "feat");
  CHECK(j["branches"].size() == 2);

  // A push to nowhere fails at once, whatever credentials the host may have lying around.
  auto push = run_sync(build_command(accepted(op::push, R"({"path":")" + repo + R"("})"), SANDFORT_AGENT_PATH));
  CHECK(push.exit_code != 0);
  CHECK_FALSE(push.timed_out);
}

TEST_CASE("a git that is not there is exit code 127, and timeouts kill it") {
  auto missing = run_sync(plain({"no-such-git-binary"}));
  CHECK(missing.exit_code == 127);
  CHECK(missing.stderr_data.find("command not found") != std::string::npos);
  run_options options;
  options.timeout = std::chrono::milliseconds(200);
  auto slow = run_coroutine(run_git(plain({"/bin/sh", "-c", "sleep 30 & sleep 30"}), std::nullopt, options));
  REQUIRE(slow.ok());
  CHECK(slow->timed_out);
  CHECK(slow->exit_code == 124);
  CHECK(slow->duration < std::chrono::seconds(5));
}
