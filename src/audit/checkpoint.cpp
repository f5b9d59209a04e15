#include "sandfort/audit/checkpoint.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "canonical.hpp"

namespace sandfort::audit {

result<std::string> try_checkpoint_message(const audit::checkpoint_record& c) {
  const nlohmann::json object = {
      {"org_id", c.org_id}, {"seq", c.seq}, {"head_hash", c.head_hash}, {"ts", c.ts}, {"key_id", c.key_id}};
  return detail::canonical_dump(object);
}

std::string checkpoint_message(const audit::checkpoint_record& c) {
  auto message = try_checkpoint_message(c);
  if (!message) throw std::invalid_argument("audit checkpoint has no canonical form: " + message.err().message);
  return std::move(message).value();
}

audit::checkpoint_record make_checkpoint(const std::string& org_id, const audit::chain_head& head,
                                         const std::string& ts, const signing_key& key) {
  audit::checkpoint_record c;
  c.org_id = org_id;
  c.seq = head.seq;
  c.head_hash = head.seq == 0 && head.hash.empty() ? genesis_hash() : head.hash;
  c.ts = ts;
  c.key_id = key.key_id();
  c.signature = key.sign(checkpoint_message(c));
  return c;
}

}  // namespace sandfort::audit
