// The canonical form, byte for byte: golden strings, refusals, and Python's json.dumps as referee.

#include <catch2/catch.hpp>

#include <sstream>

#include "sandfort/audit/chain.hpp"
#include "sandfort/core/ids.hpp"
#include "support.hpp"

using namespace sandfort;

namespace {

audit::event_record plain_event() {
  audit::event_record e;
  e.org_id = "org-0123456789abcdef";
  e.seq = 1;
  e.ts = "2025-01-02T03:04:05Z";
  e.actor = "key-00000000000000aa";
  e.action = "sandbox.create";
  e.target = "sbx-1111111111111111";
  e.outcome = "ok";
  e.request_id = "req-1";
  e.source = "127.0.0.1";
  e.details = R"({"b":2, "a":[1,"x",true,null,{}], "c":{"z":-5,"y":false}})";
  e.prev_hash = audit::genesis_hash();
  return e;
}

// Quotes, backslashes, every kind of control character, non-ASCII of 2, 3 and 4 bytes, U+2028, DEL.
audit::event_record awkward_event() {
  audit::event_record e = plain_event();
  e.seq = 42;
  e.actor = "Zoë \"q\" \\ 日本 😀";
  e.target = std::string("a\nb\tc\x01\x1f") + "\x7f/\xe2\x80\xa8" + "end";
  e.outcome = "\b\f\r\"";
  e.request_id = std::string("nul\0x", 5);
  e.source = "";
  e.details = R"({"é":"\u0000","e":"x","Z":[],"~":1,"\ue000":"\ud83d\ude00","😀":"\u00e9\/"})";
  e.prev_hash = std::string(64, 'a');
  return e;
}

// One line per event for the Python referee: seq, then each string field as "x" + hex of its bytes.
std::string python_input(const std::vector<audit::event_record>& events) {
  std::ostringstream out;
  for (const auto& e : events) {
    out << e.seq;
    for (const auto* f : {&e.org_id, &e.ts, &e.actor, &e.action, &e.target, &e.outcome, &e.request_id, &e.source,
                          &e.details, &e.prev_hash})
      out << " x" << to_hex(*f);
    out << "\n";
  }
  return out.str();
}

// Builds each event from the raw field bytes (not from our output) and prints the hex of its
// canonical JSON as Python writes it, and the chain hash over it.
const char* const python_referee = R"PY(
import hashlib, json, sys
names = ["org_id", "ts", "actor", "action", "target", "outcome", "request_id", "source", "details", "prev_hash"]
for line in open(sys.argv[1]):
    parts = line.split()
    obj = {name: bytes.fromhex(p[1:]).decode("utf-8") for name, p in zip(names, parts[1:])}
    obj["seq"] = int(parts[0])
    obj["details"] = json.loads(obj["details"])
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    digest = hashlib.sha256(obj["prev_hash"].encode("utf-8") + canonical).hexdigest()
    print(canonical.hex(), digest)
)PY";

}  // namespace

TEST_CASE("canonical_json: sorted keys, no whitespace, details embedded as an object") {
  CHECK(audit::canonical_json(plain_event()) ==
        R"({"action":"sandbox.create","actor":"key-00000000000000aa",)"
        R"("details":{"a":[1,"x",true,null,{}],"b":2,"c":{"y":false,"z":-5}},)"
        R"("org_id":"org-0123456789abcdef","outcome":"ok",)"
        R"("prev_hash":"0000000000000000000000000000000000000000000000000000000000000000",)"
        R"("request_id":"req-1","seq":1,"source":"127.0.0.1","target":"sbx-1111111111111111",)"
        R"("ts":"2025-01-02T03:04:05Z"})");
}

TEST_CASE("canonical_json: UTF-8 as is, quotes and control characters escaped the JSON way") {
  const std::string expected =
      std::string(R"({"action":"sandbox.create","actor":"Zoë \"q\" \\ 日本 😀",)") +
      R"("details":{"Z":[],"e":"x","~":1,"é":"\u0000",")" + "\xee\x80\x80" + R"(":"😀","😀":"é/"},)" +
      R"("org_id":"org-0123456789abcdef","outcome":"\b\f\r\"",)" +
      R"("prev_hash":")" + std::string(64, 'a') + R"(",)" +
      R"("request_id":"nul\u0000x","seq":42,"source":"",)" +
      R"("target":"a\nb\tc\u0001\u001f)" + "\x7f/\xe2\x80\xa8" + R"(end","ts":"2025-01-02T03:04:05Z"})";
  CHECK(audit::canonical_json(awkward_event()) == expected);
}

TEST_CASE("canonical_json and chain_hash agree with Python's json.dumps(sort_keys, compact, ensure_ascii=False)") {
  std::vector<audit::event_record> events = {plain_event(), awkward_event()};
  audit::event_record every_byte = plain_event();
  for (int c = 0; c < 0x80; ++c) every_byte.actor += static_cast<char>(c);
  every_byte.target = "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
  every_byte.details = R"({"max":9007199254740991,"min":-9007199254740991,"zero":-0,"deep":[[[{"k":[]}]]],)"
                       R"("keys":{"a":1,"A":2,"_":3,"ä":4,"\uffff":5,"\ud800\udc00":6,"1":7,"10":8,"2":9}})";
  events.push_back(every_byte);
  auto chain = testing::sealed_chain("org-00000000000000ff", 3);
  events.insert(events.end(), chain.begin(), chain.end());

  std::istringstream python(testing::run_python(python_referee, python_input(events)));
  for (const auto& e : events) {
    std::string canonical_hex, hash;
    REQUIRE(python >> canonical_hex >> hash);
    CHECK(to_hex(audit::canonical_json(e)) == canonical_hex);
    CHECK(audit::chain_hash(e.prev_hash, e) == hash);
  }
}

TEST_CASE("canonical_json refuses what has no canonical form") {
  const auto refused = [](const std::string& details) {
    auto e = plain_event();
    e.details = details;
    auto r = audit::try_canonical_json(e);
    return !r && r.err().code == errc::invalid_argument;
  };
  CHECK(refused(R"({"a":1.5})"));
  CHECK(refused(R"({"a":1.0})"));
  CHECK(refused(R"({"a":1e2})"));
  CHECK(refused(R"({"a":9007199254740992})"));
  CHECK(refused(R"({"a":-9007199254740992})"));
  CHECK(refused(R"({"a":18446744073709551616})"));
  CHECK(refused(R"([1,2])"));
  CHECK(refused(R"("text")"));
  CHECK(refused(""));
  CHECK(refused(R"({"a":1} x)"));
  CHECK(refused(R"({"a":"\ud800"})"));        // lone surrogate
  CHECK(refused("{\"a\":\"\xff\"}"));        // invalid UTF-8 inside details
  CHECK(refused("{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}"));
  CHECK_FALSE(refused("{\"a\":" + std::string(30, '[') + std::string(30, ']') + "}"));

  for (const std::string bad : {"\xff", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "ok\x80"}) {
    auto e = plain_event();
    e.actor = bad;
    CHECK_FALSE(audit::try_canonical_json(e));
    CHECK_THROWS_AS(audit::canonical_json(e), std::invalid_argument);
  }
}

TEST_CASE("canonical_details writes a details text canonically") {
  CHECK(*audit::canonical_details(R"( { "b" : [ 1 , -0 ] , "a" : "\u00e9" } )") == R"({"a":"é","b":[1,0]})");
  CHECK(*audit::canonical_details("{}") == "{}");
  // Duplicate keys: the last one wins, as in Python and JavaScript.
  CHECK(*audit::canonical_details(R"({"a":1,"a":2})") == R"({"a":2})");
}
