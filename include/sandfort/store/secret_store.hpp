#pragma once
// Organization secrets and interception CAs (src/store/secrets.cpp): sealed values only, never a
// value in the clear (docs/secrets.md). Over the one connection of store::database; a thin handle
// that must not outlive its database.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/store/database.hpp"

namespace sandfort::store {

struct secret_record {
  std::string org_id;
  std::string name;
  std::string sealed_value;  // secrets::sealing_key::seal of the value
  std::string key_id;        // which key sealed it
  std::string hosts_json;    // ["api.openai.com", "*.example.com"]
  std::string placement_json;
  std::int64_t version = 1;
  std::string created_at;
  std::string updated_at;
};

struct interception_ca_record {
  std::string org_id;
  std::string certificate_pem;
  std::string sealed_key;
  std::string key_id;
  std::string created_at;
};

class secret_store {
 public:
  secret_store(database& db) : db_(&db) {}  // NOLINT

  // conflict when the organization has a secret of that name.
  result<void> insert(const secret_record& r);
  result<std::int64_t> count(const std::string& org_id);
  // By name.
  result<std::vector<secret_record>> list(const std::string& org_id);
  result<secret_record> get(const std::string& org_id, const std::string& name);
  // A new value and/or hosts (nullopt: kept); the version goes up by one. not_found when absent.
  result<void> update(const std::string& org_id, const std::string& name, const std::optional<std::string>& sealed_value,
                      const std::optional<std::string>& key_id, const std::optional<std::string>& hosts_json,
                      const std::string& now);
  result<void> remove(const std::string& org_id, const std::string& name);  // not_found when absent

  // Rows (secrets and CA keys, of every organization) sealed by a key other than `key_id`: a key
  // file lost or replaced since they were written.
  result<std::int64_t> count_sealed_by_other(const std::string& key_id);

  result<std::optional<interception_ca_record>> interception_ca(const std::string& org_id);
  // The first CA stored for the organization stays: false when one was there already.
  result<bool> insert_interception_ca(const interception_ca_record& r);
  result<void> remove_interception_ca(const std::string& org_id);

 private:
  database* db_;
};

}  // namespace sandfort::store
