#pragma once
// Runs the process out of descriptors, for tests of what a server does on EMFILE: lowers the
// soft RLIMIT_NOFILE and fills every free slot below it. release() (or the destructor) gives
// everything back. Make the sockets the test needs before squeezing.

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <vector>

namespace sandfort::testing {

class descriptor_squeeze {
 public:
  explicit descriptor_squeeze(rlim_t limit = 1024) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    if (lowered.rlim_cur > limit) lowered.rlim_cur = limit;
    restore_ = ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
    int seed = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (seed < 0) return;
    fds_.push_back(seed);
    for (;;) {
      int fd = ::fcntl(seed, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) {
        exhausted_ = errno == EMFILE;
        break;
      }
      fds_.push_back(fd);
    }
  }
  ~descriptor_squeeze() { release(); }
  descriptor_squeeze(const descriptor_squeeze&) = delete;
  descriptor_squeeze& operator=(const descriptor_squeeze&) = delete;

  // The table is full: the next socket(), accept() or open() fails with EMFILE.
  bool exhausted() const { return exhausted_; }

  void release() {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
    if (restore_) ::setrlimit(RLIMIT_NOFILE, &saved_);
    restore_ = false;
  }

 private:
  rlimit saved_{};
  std::vector<int> fds_;
  bool exhausted_ = false;
  bool restore_ = false;
};

// CPU time this process has used (every thread), for "the loop does not spin" checks.
inline std::chrono::microseconds process_cpu_time() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto us = [](const timeval& tv) { return std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec); };
  return std::chrono::duration_cast<std::chrono::microseconds>(us(usage.ru_utime) + us(usage.ru_stime));
}

}  // namespace sandfort::testing
