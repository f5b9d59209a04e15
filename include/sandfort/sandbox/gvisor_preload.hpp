#pragma once
// The library preloaded into every process of a gVisor sandbox (src/sandbox/gvisor/statx_shim.c):
// Debian's runsc refuses statx and fstatat with AT_NO_AUTOMOUNT, so `ls` and `stat` failed there.
// sandfortd carries its bytes and writes them under its state directory at start; gVisor
// containers mount that file read-only and name it in LD_PRELOAD.

#include <string>

#include "sandfort/core/config.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::sandbox {

// Where a gVisor sandbox sees it.
inline constexpr const char* gvisor_preload_in_container = "/.sandfort/statx.so";

// Where sandfortd keeps it on the host: <state_dir>/gvisor/statx-shim.so.
std::string gvisor_preload_path(const config& cfg);

// Writes it there, read-only for everyone, replacing the file by a rename: running sandboxes keep
// the copy they mounted.
result<void> install_gvisor_preload(const config& cfg);

}  // namespace sandfort::sandbox
