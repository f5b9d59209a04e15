#pragma once
// The console's files, compiled into sandfortd (cmake/embed_console.py from console/).

#include <string_view>
#include <vector>

namespace sandfort::api {

struct console_asset {
  std::string_view name;          // served at /console/<name> ("vendor/xterm.mjs")
  std::string_view content_type;
  std::string_view body;
  std::string_view gzipped;       // the same bytes gzip-compressed at build; empty: not worth it
  std::string_view etag;          // quoted, from the file's SHA-256
};

const std::vector<console_asset>& console_assets();

}  // namespace sandfort::api
