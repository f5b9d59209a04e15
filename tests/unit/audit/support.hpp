#pragma once
// Shared by the audit tests: sample events, sealed chains, and running a Python script whose
// output the C++ side must match byte for byte.

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "../store/temp_dir.hpp"
#include "sandfort/audit/chain.hpp"
#include "sandfort/audit/signing.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::testing {

inline const std::string org_a = "org-000000000000000a";
inline const std::string org_b = "org-000000000000000b";

inline audit::signing_key load_key(const std::string& path) {
  auto key = audit::signing_key::load_or_create(path);
  if (!key) throw std::runtime_error(key.err().message);
  return std::move(*key);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline audit::event_record sample_event(const std::string& org_id, int n) {
  audit::event_record e;
  e.org_id = org_id;
  e.ts = "2025-01-02T03:04:" + std::string(n % 60 < 10 ? "0" : "") + std::to_string(n % 60) + "Z";
  e.actor = "key-00000000000000aa";
  e.action = n % 2 == 0 ? "sandbox.create" : "sandbox.exec";
  e.target = "sbx-" + std::to_string(1000000000000000 + n);
  e.outcome = "ok";
  e.request_id = "req-" + std::to_string(n);
  e.source = "10.0.0." + std::to_string(n % 250);
  e.details = R"({"n":)" + std::to_string(n) + R"(,"image":"python:3.12"})";
  return e;
}

// count events of org_id, sealed one after the other.
inline std::vector<audit::event_record> sealed_chain(const std::string& org_id, int count) {
  std::vector<audit::event_record> chain;
  audit::chain_head head;
  for (int n = 1; n <= count; ++n) {
    auto e = sample_event(org_id, n);
    if (!audit::seal(e, head)) throw std::logic_error("seal failed");
    head = {e.seq, e.hash};
    chain.push_back(std::move(e));
  }
  return chain;
}

// Runs /usr/bin/python3 on script with the path of a file holding input; returns its stdout.
inline std::string run_python(const std::string& script, const std::string& input) {
  temp_dir dir;
  std::ofstream(dir.file("script.py"), std::ios::binary) << script;
  std::ofstream(dir.file("input"), std::ios::binary) << input;
  const std::string command = "/usr/bin/python3 " + dir.file("script.py") + " " + dir.file("input");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (::pclose(pipe) != 0) throw std::runtime_error("python3 failed: " + command);
  return out;
}

}  // namespace sandfort::testing
