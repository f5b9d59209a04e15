// Preloaded into the processes of gVisor sandboxes (LD_PRELOAD, docs/gvisor.md): the runsc that
// Debian ships answers EINVAL to statx and fstatat called with AT_NO_AUTOMOUNT, which coreutils 9.1
// passes on every `ls` and `stat`. The flag only asks the kernel not to trigger an automount, and a
// sandbox has none, so dropping it changes nothing else.
//
// Built without a C library (-nostdlib, no DT_NEEDED): the same file loads into glibc and musl
// programs. `syscall` is the C library's, found at load time in the program it is preloaded into;
// it sets errno as the wrappers it replaces do.
#include <sys/syscall.h>

#define SANDFORT_AT_NO_AUTOMOUNT 0x800

extern long syscall(long number, ...);

struct stat;
struct statx;

__attribute__((visibility("default"))) int statx(int dirfd, const char* path, int flags, unsigned mask,
                                                 struct statx* out) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~SANDFORT_AT_NO_AUTOMOUNT, mask, out);
}

// On 64-bit Linux the C library's struct stat is the kernel's, so newfstatat fills it as is.
__attribute__((visibility("default"))) int fstatat(int dirfd, const char* path, struct stat* out, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, out, flags & ~SANDFORT_AT_NO_AUTOMOUNT);
}

__attribute__((visibility("default"))) int fstatat64(int dirfd, const char* path, struct stat* out, int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, out, flags & ~SANDFORT_AT_NO_AUTOMOUNT);
}
