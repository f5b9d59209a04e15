// sandfort-agent: the main process of every sandbox container (tini runs in front of it and
// reaps orphans). It serves HTTP/1.1 on a unix socket in a directory that sandfortd
// bind-mounts from the host. It reads no environment variables of its own: its environment
// is the sandbox's, passed on to the commands it runs.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "claim/workdir.hpp"
#include "commands/commands.hpp"
#include "git/credentials.hpp"
#include "home/dial.hpp"
#include "ports/forward.hpp"
#include "interpreter/contexts.hpp"
#include "sandfort/version.hpp"
#include "process/oom.hpp"
#include "routes.hpp"
#include "session/session.hpp"
#include "sandfort/http/server.hpp"

namespace {

namespace asio = boost::asio;
using namespace sandfort;

constexpr std::chrono::seconds shutdown_grace{2};

struct options {
  std::string socket = "/run/sandfort/agent.sock";
  std::optional<mode_t> socket_mode;
  std::string cgroup_root = "/sys/fs/cgroup";
  // The maxima sandfortd passes at container start; every command the agent runs obeys them,
  // whatever a request asks (sessions::limits and commands::limits hold the defaults).
  std::optional<std::uint64_t> max_timeout_s, default_timeout_s, output_cap, log_cap;
  std::string workdir;
  // A sandbox with no network interface: dial sandfortd's door instead of listening
  // (home/dial.hpp), and serve the sandbox's HTTP_PROXY on egress_listen.
  std::string home;
  std::string egress_listen = "127.0.0.1:3128";
};

// The agent's own bounds on the numeric flags: beyond them a flag is a mistake.
constexpr std::uint64_t max_seconds = 2'000'000;
constexpr std::uint64_t max_bytes = std::uint64_t{1} << 30;

constexpr const char* usage =
    "usage: sandfort-agent [--socket PATH] [--socket-mode OCTAL] [--cgroup-root PATH] [LIMITS]\n"
    "  --socket PATH        unix socket to serve on (default /run/sandfort/agent.sock);\n"
    "                       its directory is created if missing\n"
    "  --socket-mode OCTAL  chmod the socket after binding (default: as the umask leaves it)\n"
    "  --cgroup-root PATH   where the sandbox's cgroup is mounted, to tell OOM kills apart\n"
    "                       (default /sys/fs/cgroup)\n"
    "  --max-timeout-s N    the longest any command or code run may run; a session exec asking more is\n"
    "                       refused, a one-shot exec is held to it (default 3600)\n"
    "  --default-timeout-s N  a session exec's timeout when it names none (default 60, at most\n"
    "                       --max-timeout-s)\n"
    "  --output-cap BYTES   output kept per stream of an exec, and per code run (output and\n"
    "                       results); the rest is cut (default 10485760)\n"
    "  --log-cap BYTES      a background command's log per stream: the newest bytes are kept\n"
    "                       (default 1048576)\n"
    "  --workdir PATH       the directory to work in, made (as this user) if missing; every\n"
    "                       process starts there (default: where the agent was started)\n"
    "  --home PATH          dial sandfortd's door at PATH (a sandbox with no network interface)\n"
    "                       instead of listening on --socket\n"
    "  --egress-listen HOST:PORT  with --home: where the sandbox's HTTP_PROXY points\n"
    "                       (default 127.0.0.1:3128)\n"
    "  --version            print the version and exit\n";

bool limit_flag(std::string_view flag) {
  return flag == "--max-timeout-s" || flag == "--default-timeout-s" || flag == "--output-cap" || flag == "--log-cap";
}

// A limit flag's value: a whole number within the agent's bounds (at least 1, except an output
// cap of 0, which keeps no output at all).
bool parse_limit(std::string_view flag, const std::string& value, options& opts) {
  const bool bytes = flag == "--output-cap" || flag == "--log-cap";
  const std::uint64_t low = flag == "--output-cap" ? 0 : 1, high = bytes ? max_bytes : max_seconds;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0 || n < low || n > high) {
    std::fprintf(stderr, "sandfort-agent: %.*s wants a whole number from %llu to %llu, not '%s'\n",
                 static_cast<int>(flag.size()), flag.data(), static_cast<unsigned long long>(low),
                 static_cast<unsigned long long>(high), value.c_str());
    return false;
  }
  auto& slot = flag == "--max-timeout-s"       ? opts.max_timeout_s
               : flag == "--default-timeout-s" ? opts.default_timeout_s
               : flag == "--output-cap"        ? opts.output_cap
                                               : opts.log_cap;
  slot = n;
  return true;
}

// Returns an exit code when the process should stop here (help, version, bad flags).
std::optional<int> parse_flags(int argc, char** argv, options& opts) {
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    std::string value;
    bool has_value = false;
    if (auto eq = flag.find('='); eq != std::string_view::npos) {
      value = std::string(flag.substr(eq + 1));
      flag = flag.substr(0, eq);
      has_value = true;
    }
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (flag == "--version") {
      std::printf("sandfort-agent %s\n", sandfort::version);
      return 0;
    }
    if (flag != "--socket" && flag != "--socket-mode" && flag != "--cgroup-root" && flag != "--workdir" &&
        flag != "--home" && flag != "--egress-listen" && !limit_flag(flag)) {
      std::fprintf(stderr, "sandfort-agent: unknown flag '%s'\n%s", argv[i], usage);
      return 2;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sandfort-agent: %s needs a value\n%s", argv[i], usage);
        return 2;
      }
      value = argv[++i];
    }
    if (limit_flag(flag)) {
      if (!parse_limit(flag, value, opts)) return 2;
    } else if (flag == "--socket") {
      if (value.empty()) {
        std::fprintf(stderr, "sandfort-agent: --socket must not be empty\n");
        return 2;
      }
      opts.socket = value;
    } else if (flag == "--home" || flag == "--egress-listen") {
      if (value.empty() || (flag == "--home" && value.front() != '/')) {
        std::fprintf(stderr, "sandfort-agent: %s wants %s, not '%s'\n", argv[i],
                     flag == "--home" ? "an absolute path" : "HOST:PORT", value.c_str());
        return 2;
      }
      (flag == "--home" ? opts.home : opts.egress_listen) = value;
    } else if (flag == "--workdir") {
      if (value.empty() || value.front() != '/') {
        std::fprintf(stderr, "sandfort-agent: --workdir wants an absolute path, not '%s'\n", value.c_str());
        return 2;
      }
      opts.workdir = value;
    } else if (flag == "--cgroup-root") {
      if (value.empty()) {
        std::fprintf(stderr, "sandfort-agent: --cgroup-root must not be empty\n");
        return 2;
      }
      opts.cgroup_root = value;
    } else {
      char* end = nullptr;
      unsigned long mode = std::strtoul(value.c_str(), &end, 8);
      if (value.empty() || *end != '\0' || mode > 07777) {
        std::fprintf(stderr, "sandfort-agent: --socket-mode wants an octal mode like 0660, not '%s'\n", value.c_str());
        return 2;
      }
      opts.socket_mode = static_cast<mode_t>(mode);
    }
  }
  return std::nullopt;
}

// mkdir -p: the socket's directory is usually the bind mount, but need not exist yet.
bool make_dirs(const std::string& dir) {
  for (std::size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
    if (slash == std::string::npos) return true;
  }
}

// The limit flags over the built-in defaults. A default timeout above the maximum is brought
// down to it: a command that names no timeout must not run longer than one that names the most.
void apply_limits(const options& opts) {
  using std::chrono::seconds;
  agent::sessions::limits s = agent::sessions::current_limits();
  if (opts.max_timeout_s) s.max_timeout = seconds(*opts.max_timeout_s);
  if (opts.default_timeout_s) s.default_timeout = seconds(*opts.default_timeout_s);
  s.default_timeout = std::min(s.default_timeout, s.max_timeout);
  if (opts.output_cap) s.output_cap = static_cast<std::size_t>(*opts.output_cap);
  agent::sessions::configure(s);
  agent::commands::limits c = agent::commands::current_limits();
  if (opts.log_cap) c.log_cap = static_cast<std::size_t>(*opts.log_cap);
  agent::commands::configure(c);
  agent::interpreter::limits i = agent::interpreter::current_limits();
  i.max_timeout = s.max_timeout;
  i.default_timeout = std::min(i.default_timeout, i.max_timeout);
  i.output_cap = s.output_cap;
  agent::interpreter::configure(i);
}

// Started with 0/1/2 closed, the first pipes of a command would land on them.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) ::open("/dev/null", O_RDWR);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Started by the sandbox's git as its GIT_ASKPASS (git/credentials.hpp): answer the one
  // prompt from the inherited memfd and exit, before anything else.
  if (agent::git::is_askpass_call(argc, argv)) return agent::git::askpass_main(argv[1]);
  options opts;
  if (auto code = parse_flags(argc, argv, opts)) return *code;

  // A command that closes its stdin early must not kill the agent; children must stay
  // reapable by us (an inherited SIG_IGN for SIGCHLD would make the kernel reap them).
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGCHLD, SIG_DFL);
  ensure_standard_fds();
  agent::set_cgroup_root(opts.cgroup_root);
  apply_limits(opts);
  // Not fatal: a user who may not make it (a non-root user where / is root's) still gets a
  // sandbox, in the directory the container started in.
  if (!opts.workdir.empty())
    if (auto entered = agent::claim::enter_workdir(opts.workdir); !entered)
      std::fprintf(stderr, "sandfort-agent: %s; staying in the container's working directory\n",
                   entered.err().message.c_str());

  if (auto slash = opts.socket.rfind('/'); opts.home.empty() && slash != std::string::npos && slash > 0) {
    std::string dir = opts.socket.substr(0, slash);
    if (!make_dirs(dir)) {
      std::fprintf(stderr, "sandfort-agent: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
      return 1;
    }
  }

  asio::io_context ioc{1};
  http::router router;
  router.add(agent::routes());
  http::server_options server_opts;
  server_opts.server_name = "sandfort-agent";
  server_opts.trust_request_id = true;
  http::server server(ioc, server_opts, [&router](http::context& ctx) { return router.dispatch(ctx); });
  server.set_stream_selector(http::make_stream_selector(agent::stream_routes()));

  if (!opts.home.empty()) {
    agent::home::dial_options dialing;
    dialing.door = opts.home;
    dialing.egress_listen = opts.egress_listen;
    auto dialed = agent::home::dial_home(ioc, dialing, server);
    if (!dialed) {
      std::fprintf(stderr, "sandfort-agent: %s\n", dialed.err().message.c_str());
      return 1;
    }
    if (*dialed != 0) agent::ports::keep_private(*dialed);
  } else if (auto listening = server.listen_unix(opts.socket); !listening) {
    std::fprintf(stderr, "sandfort-agent: %s\n", listening.err().message.c_str());
    return 1;
  }
  if (opts.home.empty() && opts.socket_mode && ::chmod(opts.socket.c_str(), *opts.socket_mode) != 0) {
    std::fprintf(stderr, "sandfort-agent: cannot chmod %s: %s\n", opts.socket.c_str(), std::strerror(errno));
    return 1;
  }

  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    server.stop();
    // Let answers in flight go out briefly; commands still running are killed when the
    // io_context goes away (their coroutines kill and reap them).
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          co_await server.drain(shutdown_grace);
          ioc.stop();
        },
        asio::detached);
  });

  std::fprintf(stderr, "sandfort-agent %s: pid %d, %s %s\n", sandfort::version, static_cast<int>(::getpid()),
               opts.home.empty() ? "listening on" : "dialing home to", (opts.home.empty() ? opts.socket : opts.home).c_str());
  ioc.run();
  if (opts.home.empty()) ::unlink(opts.socket.c_str());
  return 0;
}
