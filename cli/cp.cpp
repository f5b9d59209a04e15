// `sandfort cp`: files both ways through /files, directories through /files/archive (tar made
// and unpacked by the local `tar`, streamed, never held whole on the remote side).
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "api_client.hpp"
#include "commands.hpp"
#include "failure.hpp"

namespace sandfort::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct location {
  bool remote = false;
  std::string sandbox;
  std::string path;
};

// "sbx-…:/path" or "NAME:/path" is in a sandbox; anything else is local.
location parse_location(const std::string& spec) {
  auto colon = spec.find(':');
  if (colon != std::string::npos && colon > 0 && spec.find('/') > colon)
    return {true, spec.substr(0, colon), spec.substr(colon + 1)};
  return {false, "", spec};
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string files_target(const std::string& sandbox, const std::string& what, const std::string& path) {
  return "/v1/sandboxes/" + url_encode(sandbox) + what + "?path=" + url_encode(path);
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return fs::path(p).filename().string();
}

int upload(const std::string& local, const location& dst) {
  if (dst.path.empty() || dst.path.front() != '/') throw failure("the sandbox path must be absolute: " + dst.path, 2);
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0) throw failure("cannot read " + local + ": no such file or directory");
  api_client client = connect_api();
  request_spec spec;
  spec.method = verb::put;
  spec.content_type = "application/octet-stream";
  if (S_ISDIR(st.st_mode)) {
    std::FILE* tar = ::popen(("tar -C " + shell_quote(local) + " -cf - .").c_str(), "r");
    if (!tar) throw failure("cannot run tar to pack " + local);
    spec.body_source = [&](char* out, std::size_t size) { return std::fread(out, 1, size, tar); };
    spec.target = files_target(dst.sandbox, "/files/archive", dst.path);
    response r;
    try {
      r = client.send(spec);
    } catch (...) {
      ::pclose(tar);
      throw;
    }
    int tar_status = ::pclose(tar);
    if (r.status / 100 != 2) throw_api_error(r);
    if (tar_status != 0) throw failure("tar failed to pack " + local);
    return 0;
  }
  std::ifstream in(local, std::ios::binary);
  if (!in) throw failure("cannot read " + local);
  spec.body_size = static_cast<std::uint64_t>(st.st_size);
  spec.body_source = [&](char* out, std::size_t size) {
    in.read(out, static_cast<std::streamsize>(size));
    return static_cast<std::size_t>(in.gcount());
  };
  std::string path = dst.path;
  if (path.back() == '/') path += base_name(local);
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 0777);
  spec.target = files_target(dst.sandbox, "/files", path) + "&mode=" + mode;
  response r = client.send(spec);
  if (r.status / 100 != 2) throw_api_error(r);
  return 0;
}

int download(const location& src, const std::string& local) {
  api_client client = connect_api();
  json st = client.call(verb::get, files_target(src.sandbox, "/files/stat", src.path));
  request_spec spec;
  if (st.value("type", "") == "dir") {
    std::error_code ec;
    fs::create_directories(local, ec);
    if (ec) throw failure("cannot create " + local + ": " + ec.message());
    std::FILE* tar = ::popen(("tar -C " + shell_quote(local) + " -xf -").c_str(), "w");
    if (!tar) throw failure("cannot run tar to unpack into " + local);
    spec.target = files_target(src.sandbox, "/files/archive", src.path);
    spec.accept = "application/x-tar";
    spec.on_chunk = [&](std::string_view piece) { std::fwrite(piece.data(), 1, piece.size(), tar); };
    response r = client.send(spec);
    int tar_status = ::pclose(tar);
    if (r.status / 100 != 2) throw_api_error(r);
    if (tar_status != 0) throw failure("tar failed to unpack into " + local);
    return 0;
  }
  std::string path = local;
  if (local != "-" && fs::is_directory(local)) path = (fs::path(local) / base_name(src.path)).string();
  std::string partial = path + ".sandfort-part";
  std::ofstream out;
  if (path != "-") {
    out.open(partial, std::ios::binary | std::ios::trunc);
    if (!out) throw failure("cannot write " + path);
  }
  spec.target = files_target(src.sandbox, "/files", src.path);
  spec.accept = "application/octet-stream";
  spec.on_chunk = [&](std::string_view piece) {
    if (path == "-")
      std::fwrite(piece.data(), 1, piece.size(), stdout);
    else
      out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
  };
  response r = client.send(spec);
  if (path == "-") {
    if (r.status / 100 != 2) throw_api_error(r);
    return 0;
  }
  out.close();
  if (r.status / 100 != 2) {
    fs::remove(partial);
    throw_api_error(r);
  }
  fs::rename(partial, path);
  if (st.contains("mode") && st["mode"].is_string())
    ::chmod(path.c_str(), static_cast<mode_t>(std::stoul(st["mode"].get<std::string>(), nullptr, 8) & 0777));
  return 0;
}

}  // namespace

int cmd_cp(const std::string& src, const std::string& dst) {
  location from = parse_location(src), to = parse_location(dst);
  if (from.remote == to.remote)
    throw failure("cp copies between this machine and a sandbox: exactly one of SRC and DST must be SANDBOX:/path", 2);
  return from.remote ? download(from, dst) : upload(src, to);
}

}  // namespace sandfort::cli
