#pragma once
// The bytes of a tar header (POSIX ustar, with the GNU and pax extensions we read and write).
// Private to the file capability.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandfort::agent::fs::tar {

inline constexpr std::size_t block = 512;

// Offsets and widths of the ustar header fields.
struct field {
  std::size_t offset, width;
};
inline constexpr field name{0, 100}, mode{100, 8}, uid{108, 8}, gid{116, 8}, size_field{124, 12}, mtime{136, 12},
    checksum{148, 8}, typeflag{156, 1}, linkname{157, 100}, magic{257, 6}, version{263, 2}, uname{265, 32},
    gname{297, 32}, devmajor{329, 8}, devminor{337, 8}, prefix{345, 155};

inline std::uint64_t padding_of(std::uint64_t size) { return (block - size % block) % block; }

// A NUL-terminated (or full-width) text field.
std::string_view text(const char* header, field f);

// Octal (leading spaces or NULs allowed, ended by a space or NUL) or GNU base-256 (high bit
// of the first byte set). nullopt for garbage and for negative base-256 values.
std::optional<std::uint64_t> number(const char* header, field f);

// True when the header's checksum matches (the unsigned sum, or the signed one old tars
// wrote).
bool checksum_ok(const char* header);

bool all_zero(const char* header);

// Octal when it fits in width-1 digits, else base-256.
void put_number(char* header, field f, std::uint64_t value);
// Copies at most the field's width (not NUL-terminated when full, as ustar allows).
void put_text(char* header, field f, std::string_view value);
// Fills the checksum field; call after every other field is set.
void seal(char* header);

// True when value fits in the field as octal.
bool fits_octal(field f, std::uint64_t value);

// One pax record "<len> key=value\n", where len counts the whole record.
void append_pax_record(std::string& out, std::string_view key, std::string_view value);

// Calls fn(key, value) for each record; false when the data is malformed.
template <typename Fn>
bool for_each_pax_record(std::string_view data, Fn&& fn) {
  while (!data.empty()) {
    std::size_t space = data.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 20) return false;
    std::size_t len = 0;
    for (char c : data.substr(0, space)) {
      if (c < '0' || c > '9') return false;
      len = len * 10 + static_cast<std::size_t>(c - '0');
    }
    if (len <= space + 1 || len > data.size() || data[len - 1] != '\n') return false;
    std::string_view record = data.substr(space + 1, len - space - 2);
    std::size_t eq = record.find('=');
    if (eq == std::string_view::npos) return false;
    fn(record.substr(0, eq), record.substr(eq + 1));
    data.remove_prefix(len);
  }
  return true;
}

}  // namespace sandfort::agent::fs::tar
