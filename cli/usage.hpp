#pragma once
// Usage errors that name the mistake: an unknown command or option with its near matches among
// the commands and options that exist there, instead of CLI11's generic "A subcommand is required"
// or "The following arguments were not expected".

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sandfort::cli {

// Edit distance counting a swap of two neighbours as one edit (optimal string alignment).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidates close enough to `typed` to be what was meant, nearest first.
std::vector<std::string> near_matches(std::string_view typed, const std::vector<std::string>& candidates);

// What a parse of args (argv without the program name) that CLI11 refused got wrong, as a message
// for stderr; empty when there is nothing better to say than CLI11's own message.
std::string explain_usage_error(const CLI::App& app, const std::vector<std::string>& args);

// For commands that hand everything after their own options to the sandbox (exec, run): CLI11
// stops at the first word it does not know, so a misspelt option would become the sandbox id or
// the command. Throws a usage failure (exit 2) naming it when `rest` starts with an option.
void refuse_unknown_option(const CLI::App& cmd, const std::vector<std::string>& rest);

}  // namespace sandfort::cli
