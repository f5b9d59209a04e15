#pragma once
// How a username and password reach the sandbox's git without touching its disk, an
// environment, a command line or .git/config: for one command the agent puts them in a memfd
// (memory only, no path) that git inherits as descriptor 3, and names itself as GIT_ASKPASS.
// Git (or git-remote-http, which inherits the descriptor from it) runs
// `<agent> "Username for 'https://host': "`; the agent, started that way, reads the memfd with
// pread and prints the one value asked for. The memfd is sealed and closes with the command.

#include <string>
#include <string_view>

#include "git/request.hpp"
#include "process/fd.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::git {

// The descriptor number git and its children find the credentials on.
constexpr int credential_fd_number = 3;
// The memfd's label (shown in /proc/<pid>/fd, never a file): askpass reads only such a memfd.
constexpr std::string_view credential_fd_name = "sandfort-git-credentials";

// A sealed, close-on-exec memfd holding "username\0password" (spawning maps it onto
// credential_fd_number, which clears close-on-exec for that one child).
result<unique_fd> credential_fd(const credentials& c);

// Whether the agent was started by git as its askpass program: one argument that is git's
// "Username for '…': " or "Password for '…': " prompt. The agent's own flags never look so.
bool is_askpass_call(int argc, char** argv);

// Askpass mode: prints the value the prompt asks for from the inherited memfd. 0, or 1 with a
// message on stderr when there is no memfd (a command without credentials: git gives up at
// once instead of asking a terminal) or the prompt is neither.
int askpass_main(std::string_view prompt);

// The agent's own executable, as git will run it (readlink of /proc/self/exe).
const std::string& self_path();

}  // namespace sandfort::agent::git
