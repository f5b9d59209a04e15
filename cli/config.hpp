#pragma once
// Where the CLI keeps its state: credentials in <config dir>/config.json (mode 0600) and the
// current sandbox in <config dir>/current. SANDFORT_BASE_URL / SANDFORT_API_KEY override the file.

#include <filesystem>
#include <optional>
#include <string>

namespace sandfort::cli {

struct settings {
  std::string base_url;
  std::string api_key;
};

// $XDG_CONFIG_HOME/sandfort, else $HOME/.config/sandfort.
std::filesystem::path config_dir();
std::filesystem::path config_file();

// The file's values with the environment on top; either may be empty.
settings load_settings();
// As load_settings, but both must be present (otherwise a failure that says what to do).
settings require_settings();

void save_settings(const settings& s);
// True when there was a file to remove.
bool remove_settings();

std::optional<std::string> current_sandbox();
void set_current_sandbox(const std::string& id);
void clear_current_sandbox();

}  // namespace sandfort::cli
