// Large agent answers parsed and encoded off the I/O thread (answer_workers.hpp).
#include "sandfort/sandbox/answer_workers.hpp"

#include <algorithm>
#include <cerrno>

#include <sys/resource.h>
#include <unistd.h>

namespace sandfort::sandbox {

answer_workers::answer_workers(std::size_t threads) : keep_running_(context_.get_executor()) {
  for (std::size_t i = 0; i < std::max<std::size_t>(threads, 1); ++i)
    threads_.emplace_back([this] {
      // Below the I/O thread: on a busy host a request waiting to be answered goes first, the
      // answer being parsed can wait. Raising one's own niceness needs no privilege.
      const auto me = static_cast<id_t>(::gettid());
      errno = 0;
      const int nice = ::getpriority(PRIO_PROCESS, me);
      if (errno == 0) ::setpriority(PRIO_PROCESS, me, std::min(nice + 10, 19));
      context_.run();
    });
}

answer_workers::~answer_workers() {
  keep_running_.reset();
  for (auto& t : threads_) t.join();
}

}  // namespace sandfort::sandbox
