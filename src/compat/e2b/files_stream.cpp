// E2B's POST /files (files.write) streamed: the body is read a piece at a time and each file's
// bytes go on to the agent's atomic write (PUT /files, the native upload's own: a temporary file
// renamed into place once whole) as they arrive, so an upload of any size holds at most one piece
// (64 KiB), the delimiter and one part's header in memory. An octet-stream body is one file (the
// query's path), inflated on the way when it is gzip's (Content-Encoding: gzip); a
// multipart/form-data body is one file per part, its filename the path, written one after
// another, each over its own agent connection. The other sandbox-plane bodies keep the
// listener's max_body_bytes: only this route is streamed.
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/zlib/inflate_stream.hpp>
#include <boost/crc.hpp>
#include <chrono>
#include <cstdio>
#include <spdlog/spdlog.h>

#include "wire.hpp"

namespace sandfort::compat::e2b {

namespace beast = boost::beast;

namespace {

// What is read from the client, and written to the agent, at a time.
constexpr std::size_t upload_piece = 64 * 1024;
// A part's header lines; a multipart preamble and epilogue (nothing of a file's).
constexpr std::size_t max_part_header_bytes = 16 * 1024;
constexpr std::size_t max_preamble_bytes = 64 * 1024;
constexpr std::size_t max_upload_files = 1000;
// How much of a refused upload's body is read before the refusal is answered (so that a client
// still sending reads it rather than a reset); beyond it the connection is closed.
constexpr std::size_t refused_body_drain = 1u << 20;
// The agent's answer to one file, once its last byte is sent.
constexpr auto upload_answer_timeout = std::chrono::seconds(60);
constexpr std::size_t max_upload_answer_bytes = 64 * 1024;

// The client's body, a piece at a time. Each read must arrive within `idle`.
class body_source {
 public:
  body_source(http::exchange& ex, std::chrono::seconds idle) : ex_(ex), idle_(idle), piece_(upload_piece) {
    // Beast reads no more than the buffer has room for (within its bound).
    ex_.buffer.reserve(std::min(upload_piece, ex_.buffer.max_size()));
  }

  bool done() const { return ex_.parser.is_done(); }

  // Appends the next bytes of the body to `to` (none once it is done).
  awaitable<result<void>> read_into(std::string& to) {
    while (!ex_.parser.is_done()) {
      auto& body = ex_.parser.get().body();
      body.data = piece_.data();
      body.size = piece_.size();
      ex_.stream.expires_after(idle_);
      auto [ec, n] = co_await beast::http::async_read_some(ex_.stream, ex_.buffer, ex_.parser,
                                                           asio::as_tuple(asio::use_awaitable));
      (void)n;
      ex_.stream.expires_never();
      if (ec == beast::http::error::need_buffer) ec = {};
      const std::size_t got = piece_.size() - body.size;
      body.data = nullptr;
      body.size = 0;
      if (ec) co_return make_error(errc::invalid_argument, "reading the upload: " + ec.message());
      if (got) {
        to.append(piece_.data(), got);
        co_return result<void>{};
      }
    }
    co_return result<void>{};
  }

  // Reads and drops what is left, up to `limit` bytes; whether it all arrived.
  awaitable<bool> drain(std::size_t limit) {
    std::string sink;
    std::size_t total = 0;
    while (!ex_.parser.is_done() && total <= limit) {
      sink.clear();
      if (!co_await read_into(sink)) co_return false;
      total += sink.size();
    }
    co_return ex_.parser.is_done();
  }

 private:
  http::exchange& ex_;
  std::chrono::seconds idle_;
  std::vector<char> piece_;
};

// multipart/form-data read as it arrives: the parts' headers, then each part's content in pieces.
// `held` keeps what was read and not yet handed on: at most a piece, the delimiter and a header.
class multipart_reader {
 public:
  multipart_reader(body_source& src, const std::string& boundary) : src_(src), delimiter_("\r\n--" + boundary) {
    held_ = "\r\n";  // so that a delimiter at the very start is found as any other
  }

  // The next part's filename (empty when it has none), or nullopt after the closing delimiter.
  awaitable<result<std::optional<std::string>>> next_part() {
    if (!started_) {
      // The preamble: everything before the first delimiter.
      for (;;) {
        if (auto at = held_.find(delimiter_); at != std::string::npos) {
          held_.erase(0, at + delimiter_.size());
          break;
        }
        if (held_.size() > max_preamble_bytes) co_return make_error(errc::invalid_argument, "no multipart delimiter");
        if (auto r = co_await fill(); !r) co_return std::move(r).err();
      }
      started_ = true;
    }
    // After a delimiter: "--" closes the body, else the line ends (transport padding allowed).
    for (;;) {
      if (held_.size() >= 2 && held_.compare(0, 2, "--") == 0) {
        held_.clear();
        if (!co_await src_.drain(max_preamble_bytes)) co_return make_error(errc::invalid_argument, "a multipart epilogue too long");
        co_return std::optional<std::string>();
      }
      auto eol = held_.find("\r\n");
      if (eol != std::string::npos) {
        if (held_.find_first_not_of(" \t") < eol) co_return make_error(errc::invalid_argument, "a malformed multipart delimiter");
        held_.erase(0, eol + 2);
        break;
      }
      if (held_.size() > 256) co_return make_error(errc::invalid_argument, "a malformed multipart delimiter");
      if (auto r = co_await fill(); !r) co_return std::move(r).err();
    }
    std::size_t head_end;
    while ((head_end = held_.find("\r\n\r\n")) == std::string::npos && held_.compare(0, 2, "\r\n") != 0) {
      if (held_.size() > max_part_header_bytes) co_return make_error(errc::invalid_argument, "a multipart part's header is too long");
      if (auto r = co_await fill(); !r) co_return std::move(r).err();
    }
    std::string head;
    if (held_.compare(0, 2, "\r\n") == 0) {  // a part with no header lines at all
      held_.erase(0, 2);
    } else {
      head = held_.substr(0, head_end);
      held_.erase(0, head_end + 4);
    }
    in_part_ = true;
    co_return std::optional<std::string>(filename_of(head));
  }

  // The next bytes of the current part into `out` (replaced); empty once the part ended.
  awaitable<result<void>> read_content(std::string& out) {
    out.clear();
    if (!in_part_) co_return result<void>{};
    for (;;) {
      auto at = held_.find(delimiter_);
      if (at == 0) {
        held_.erase(0, delimiter_.size());
        in_part_ = false;
        co_return result<void>{};
      }
      if (at != std::string::npos) {
        out.assign(held_, 0, at);
        held_.erase(0, at);
        co_return result<void>{};
      }
      // No whole delimiter: all but its possible beginning at the end can go.
      if (held_.size() >= delimiter_.size()) {
        const std::size_t n = held_.size() - (delimiter_.size() - 1);
        out.assign(held_, 0, n);
        held_.erase(0, n);
        co_return result<void>{};
      }
      if (auto r = co_await fill(); !r) co_return std::move(r).err();
    }
  }

 private:
  awaitable<result<void>> fill() {
    if (src_.done()) co_return make_error(errc::invalid_argument, "the multipart body ends inside a part");
    co_return co_await src_.read_into(held_);
  }

  // filename="..." of a Content-Disposition line: how FormData sends a file's path (with `"`, CR
  // and LF percent-encoded, as the HTML standard has them).
  static std::string filename_of(const std::string& head) {
    std::size_t line_start = 0;
    while (line_start < head.size()) {
      auto line_end = std::min(head.find("\r\n", line_start), head.size());
      std::string_view line(head.data() + line_start, line_end - line_start);
      line_start = line_end + 2;
      if (!beast::iequals(line.substr(0, std::min<std::size_t>(line.size(), 20)), "content-disposition:")) continue;
      auto at = line.find("filename=\"");
      if (at == std::string_view::npos) return {};
      auto value = line.substr(at + 10);
      value = value.substr(0, value.find('"'));
      std::string out;
      for (std::size_t i = 0; i < value.size(); ++i) {
        auto rest = value.substr(i, 3);
        if (rest == "%22") out += '"';
        else if (rest == "%0D" || rest == "%0d") out += '\r';
        else if (rest == "%0A" || rest == "%0a") out += '\n';
        else {
          out += value[i];
          continue;
        }
        i += 2;
      }
      return out;
    }
    return {};
  }

  body_source& src_;
  std::string delimiter_;
  std::string held_;
  bool started_ = false;
  bool in_part_ = false;
};

// A gzip body (RFC 1952, `files.write(…, {gzip: true})`) inflated as it arrives: each call hands
// on at most one piece of output, so a small body that inflates to gigabytes is never held (the
// file's size is the sandbox's disk to bound). One member; its CRC-32 and size are checked at
// its end, and an upload that fails them is not committed.
class gunzip_reader {
 public:
  explicit gunzip_reader(body_source& src) : src_(src), out_(upload_piece) {}

  // The next inflated bytes into `out` (replaced); empty at the end of the member.
  awaitable<result<void>> read(std::string& out) {
    out.clear();
    for (;;) {
      if (state_ == state::header) {
        auto parsed = parse_header();
        if (!parsed) co_return std::move(parsed).err();
        if (!*parsed) {
          if (auto r = co_await fill(); !r) co_return std::move(r).err();
          continue;
        }
        state_ = state::body;
      }
      if (state_ == state::body) {
        if (in_.empty() && !src_.done())
          if (auto r = co_await fill(); !r) co_return std::move(r).err();
        boost::beast::zlib::z_params zs;
        zs.next_in = in_.data();
        zs.avail_in = in_.size();
        zs.next_out = out_.data();
        zs.avail_out = out_.size();
        boost::system::error_code ec;
        inflate_.write(zs, boost::beast::zlib::Flush::none, ec);
        const std::size_t produced = out_.size() - zs.avail_out;
        const std::size_t consumed = in_.size() - zs.avail_in;
        in_.erase(0, consumed);
        if (produced) {
          crc_.process_bytes(out_.data(), produced);
          size_ += produced;
          out.assign(out_.data(), produced);
        }
        if (ec == boost::beast::zlib::error::end_of_stream) {
          state_ = state::trailer;
        } else if (ec && ec != boost::beast::zlib::error::need_buffers) {
          co_return make_error(errc::invalid_argument, "the gzip body is corrupt: " + ec.message());
        } else if (!produced && !consumed) {
          // No progress with what is here: more input, or the body ended too soon.
          if (auto r = co_await fill(); !r) co_return std::move(r).err();
        }
        if (produced) co_return result<void>{};
        continue;
      }
      if (state_ == state::trailer) {
        if (in_.size() < 8) {
          if (auto r = co_await fill(); !r) co_return std::move(r).err();
          continue;
        }
        auto le32 = [&](std::size_t at) {
          std::uint32_t v = 0;
          for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(in_[at + static_cast<std::size_t>(i)]);
          return v;
        };
        if (le32(0) != crc_.checksum() || le32(4) != static_cast<std::uint32_t>(size_))
          co_return make_error(errc::invalid_argument, "the gzip body's checksum or size does not match");
        in_.erase(0, 8);
        state_ = state::done;
      }
      // One member: whatever follows it is refused (it would be written nowhere).
      while (in_.empty() && !src_.done())
        if (auto r = co_await src_.read_into(in_); !r) co_return std::move(r).err();
      if (!in_.empty()) co_return make_error(errc::invalid_argument, "data after the gzip member (one member only)");
      co_return result<void>{};
    }
  }

 private:
  enum class state { header, body, trailer, done };

  awaitable<result<void>> fill() {
    if (src_.done()) co_return make_error(errc::invalid_argument, "the gzip body ends early");
    if (in_.size() > max_preamble_bytes) co_return make_error(errc::invalid_argument, "the gzip header is too long");
    co_return co_await src_.read_into(in_);
  }

  // Whether the header is whole (then it is consumed); invalid_argument when it is not gzip's.
  result<bool> parse_header() {
    if (in_.size() < 10) return false;
    const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(in_[i]); };
    if (byte(0) != 0x1f || byte(1) != 0x8b || byte(2) != 8) return make_error(errc::invalid_argument, "not a gzip body");
    const std::uint8_t flags = byte(3);
    std::size_t at = 10;
    if (flags & 0x04) {  // FEXTRA
      if (in_.size() < at + 2) return false;
      at += 2 + (byte(at) | (std::size_t{byte(at + 1)} << 8));
    }
    for (std::uint8_t text : {std::uint8_t{0x08}, std::uint8_t{0x10}}) {  // FNAME, FCOMMENT
      if (!(flags & text)) continue;
      if (at >= in_.size()) return false;
      const auto end = in_.find('\0', at);
      if (end == std::string::npos) return false;
      at = end + 1;
    }
    if (flags & 0x02) at += 2;  // FHCRC
    if (in_.size() < at) return false;
    in_.erase(0, at);
    return true;
  }

  body_source& src_;
  boost::beast::zlib::inflate_stream inflate_;  // raw deflate, a 32 KiB window
  boost::crc_32_type crc_;
  std::uint64_t size_ = 0;
  std::string in_;
  std::vector<char> out_;
  state state_ = state::header;
};

std::string content_param(std::string_view header, std::string_view name) {
  const std::string key = std::string(name) + "=";
  auto at = header.find(key);
  if (at == std::string_view::npos) return {};
  auto v = header.substr(at + key.size());
  if (!v.empty() && v[0] == '"') {
    auto end = v.find('"', 1);
    return std::string(v.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1));
  }
  return std::string(v.substr(0, v.find_first_of("; ")));
}

// An upload is an action: recorded in the audit chain before it happens, as the native one. (The
// JSON is made outside the coroutines: GCC 12 miscompiles some braced JSON inside them.)
audit::record upload_note(const std::string& target) {
  return {api::forwarded_action(http::verb::put, target), "", "accepted",
          json{{"method", "PUT"}, {"path", target.substr(0, 1024)}, {"via", "e2b"}}};
}

// envd's answer for one file written.
json written_entry(const std::string& path) {
  return json{{"name", path.substr(path.find_last_of('/') + 1)}, {"type", "file"}, {"path", path}};
}

// One file on its way to the agent: PUT /files?path= with a chunked body, then its answer.
class agent_upload {
 public:
  agent_upload(dependencies& deps, const sandbox_call& call, std::chrono::seconds idle)
      : deps_(deps), call_(call), idle_(idle) {}

  awaitable<result<void>> open(const std::string& path, const audit::actor& who) {
    const std::string target = "/files?path=" + query_escape(path);
    const audit::record note = upload_note(target);
    auto agent = co_await deps_.commands.connect_agent(call_.org_id, call_.sandbox_id, who, &note);
    if (!agent) co_return std::move(agent).err();
    session_.emplace(std::move(*agent));
    head_ = "PUT " + target +
            " HTTP/1.1\r\nHost: agent\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    // The header goes now, not with the first chunk: the agent wants a request's header within
    // its header timeout of the accept, and the first bytes may be slow to come from the client.
    const std::array<asio::const_buffer, 4> header{asio::buffer(head_), asio::const_buffer(), asio::const_buffer(),
                                                   asio::const_buffer()};
    if (!co_await send(header)) co_return make_error(errc::unavailable, "the sandbox's agent did not take the upload");
    co_return result<void>{};
  }

  // One chunk (the request's header went with open()).
  awaitable<bool> write(std::string_view bytes) {
    if (bytes.empty()) co_return true;
    char size_line[32];
    const int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", bytes.size());
    const std::array<asio::const_buffer, 4> pieces{asio::buffer(head_), asio::buffer(size_line, static_cast<std::size_t>(n)),
                                                   asio::buffer(bytes.data(), bytes.size()), asio::buffer("\r\n", 2)};
    co_return co_await send(pieces);
  }

  // The last chunk, and the agent's answer (read also when a write failed: it may have refused).
  awaitable<result<agent_answer>> finish(bool sent_all) {
    if (sent_all) {
      const std::array<asio::const_buffer, 4> pieces{asio::buffer(head_), asio::buffer("0\r\n\r\n", 5),
                                                     asio::const_buffer(), asio::const_buffer()};
      sent_all = co_await send(pieces);
    }
    auto& stream = session_->stream;
    stream.expires_after(upload_answer_timeout);
    beast::flat_buffer buffer = http::bounded_read_buffer();
    beast::http::response_parser<beast::http::string_body> parser;
    parser.body_limit(max_upload_answer_bytes);
    auto [ec, n] = co_await beast::http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    (void)n;
    stream.expires_never();
    if (ec) co_return make_error(errc::unavailable, "the sandbox's agent did not answer the upload: " + ec.message());
    agent_answer out{parser.get().result_int(), json::parse(parser.get().body(), nullptr, false)};
    if (!sent_all && out.status < 300) co_return make_error(errc::unavailable, "the upload to the sandbox's agent broke");
    co_return out;
  }

 private:
  awaitable<bool> send(const std::array<asio::const_buffer, 4>& pieces) {
    auto& stream = session_->stream;
    stream.expires_after(idle_);
    auto [ec, n] = co_await asio::async_write(stream, pieces, asio::as_tuple(asio::use_awaitable));
    (void)n;
    stream.expires_never();
    head_.clear();
    co_return !ec;
  }

  dependencies& deps_;
  const sandbox_call& call_;
  std::chrono::seconds idle_;
  std::optional<sandbox::agent_session> session_;
  std::string head_;
};

// The agent's refusal of one file as Connect's error (its class and message).
error upload_refusal(const agent_answer& a) {
  const json e = a.body.is_object() ? a.body.value("error", json::object()) : json::object();
  const std::string code = e.is_object() ? e.value("code", std::string()) : std::string();
  const std::string message = e.is_object() ? e.value("message", std::string("the agent refused the file"))
                                            : std::string("the agent refused the file");
  const errc c = code == "not_found"           ? errc::not_found
                 : code == "invalid_argument"  ? errc::invalid_argument
                 : code == "permission_denied" ? errc::permission_denied
                 : code == "conflict"          ? errc::conflict
                                               : errc::internal;
  return make_error(c, message);
}

// Where a file goes: the part's filename when it is absolute, else the query's path.
result<std::string> upload_destination(const std::string& filename, const std::string& query_path) {
  std::string path = !filename.empty() && filename[0] == '/' ? filename : (filename.empty() ? query_path : filename);
  if (path.empty()) return make_error(errc::invalid_argument, "a file's path is required");
  if (path.size() > 4096) return make_error(errc::invalid_argument, "a file's path is longer than 4096 bytes");
  return path;
}

// Answers an Expect: 100-continue: the body is read here.
awaitable<bool> upload_continue(http::exchange& ex) {
  auto& req = ex.parser.get();
  auto expect = req.find(http::bhttp::field::expect);
  if (expect == req.end() || !beast::iequals(expect->value(), "100-continue")) co_return true;
  req.erase(http::bhttp::field::expect);
  beast::http::response<beast::http::empty_body> go_on{beast::http::status::continue_, 11};
  auto [ec, n] = co_await beast::http::async_write(ex.stream, go_on, asio::as_tuple(asio::use_awaitable));
  (void)n;
  co_return !ec;
}

// One file's content from `next` (called until it gives nothing) to the agent.
template <typename Next>
awaitable<result<json>> write_one(dependencies& deps, const sandbox_call& call, const std::string& path,
                                  const audit::actor& who, std::chrono::seconds idle, Next next) {
  agent_upload up(deps, call, idle);
  if (auto opened = co_await up.open(path, who); !opened) co_return std::move(opened).err();
  std::string bytes;
  bool sent_all = true;
  for (;;) {
    if (auto r = co_await next(bytes); !r) co_return std::move(r).err();  // the agent drops the temporary file
    if (bytes.empty()) break;
    if (!co_await up.write(bytes)) {
      sent_all = false;
      break;
    }
  }
  auto answered = co_await up.finish(sent_all);
  if (!answered) co_return std::move(answered).err();
  if (answered->status != 201) co_return upload_refusal(*answered);
  co_return written_entry(path);
}

// POST /files?path=: the body streamed to the agent's atomic writes (see the file's head).
awaitable<bool> upload_streamed(dependencies& deps, http::exchange& ex, api::stream_call& sc) {
  auto call = authorize(deps, ex.parser.get());
  if (!call) {
    sc.answered(call.err());
    co_return co_await http::respond(ex, refuse_call(call.err(), ex.request_id));
  }
  // The body is read here, refused or not (a refusal reads some of it first).
  if (!co_await upload_continue(ex)) co_return false;
  const auto idle = std::chrono::seconds(deps.cfg.agent_idle_timeout_s);
  body_source src(ex, idle);
  auto refuse = [&](const error& e) -> awaitable<bool> {
    sc.answered(e);
    // Once the body is flowing, the client may see only a reset connection: the reason is here.
    spdlog::warn("e2b: upload into {} refused: {}", call->sandbox_id, e.message);
    if (!src.done()) co_await src.drain(refused_body_drain);
    co_return co_await http::respond(ex, connect_error(e, ex.request_id));
  };
  if (call->port == interpreter_port) {
    sc.answered(501u);
    if (!src.done()) co_await src.drain(refused_body_drain);
    co_return co_await http::respond(ex, interpreter_not_served());
  }
  const auto& h = ex.parser.get();
  const std::string coding(h[http::bhttp::field::content_encoding]);
  const bool gzipped = beast::iequals(coding, "gzip");
  if (!coding.empty() && !gzipped && !beast::iequals(coding, "identity"))
    co_return co_await refuse(make_error(errc::invalid_argument, "only gzip and identity uploads are taken"));
  const std::string type(h[http::bhttp::field::content_type]);
  const std::string query_path = ex.query.count("path") ? ex.query["path"] : std::string();
  const auto who = token_actor(*call, ex.request_id, ex.remote);
  json written = json::array();

  if (!type.starts_with("multipart/form-data")) {
    if (query_path.empty()) co_return co_await refuse(make_error(errc::invalid_argument, "path is required"));
    auto path = upload_destination(query_path, query_path);
    if (!path) co_return co_await refuse(path.err());
    gunzip_reader inflated(src);
    auto next = [&](std::string& bytes) -> awaitable<result<void>> {
      if (gzipped) co_return co_await inflated.read(bytes);
      bytes.clear();
      co_return co_await src.read_into(bytes);
    };
    auto one = co_await write_one(deps, *call, *path, who, idle, next);
    if (!one) co_return co_await refuse(one.err());
    written.push_back(std::move(*one));
  } else {
    // The SDK compresses octet-stream bodies only; a compressed multipart body is not taken.
    if (gzipped) co_return co_await refuse(make_error(errc::invalid_argument, "a gzip upload must be application/octet-stream"));
    const std::string boundary = content_param(type, "boundary");
    if (boundary.empty() || boundary.size() > 200)
      co_return co_await refuse(make_error(errc::invalid_argument, "a multipart boundary is required"));
    multipart_reader parts(src, boundary);
    for (;;) {
      auto part = co_await parts.next_part();
      if (!part) co_return co_await refuse(part.err());
      if (!*part) break;
      if (written.size() >= max_upload_files)
        co_return co_await refuse(make_error(errc::invalid_argument, "at most 1000 files in one upload"));
      auto path = upload_destination(**part, query_path);
      if (!path) co_return co_await refuse(path.err());
      auto next = [&](std::string& bytes) -> awaitable<result<void>> { co_return co_await parts.read_content(bytes); };
      auto one = co_await write_one(deps, *call, *path, who, idle, next);
      if (!one) co_return co_await refuse(one.err());
      written.push_back(std::move(*one));
    }
  }
  sc.answered(200u);
  co_return co_await http::respond(ex, http::json_response(200, written));
}

}  // namespace

std::vector<api::api_route> transfer_routes() {
  // No API key: the handler authorizes the sandbox's access token first, before any of the body.
  api::api_route put{http::verb::post, "/e2b-sandbox/files", std::nullopt, api::route_kind::streamed, upload_streamed};
  put.dialect = sandbox_dialect();
  return {std::move(put)};
}

}  // namespace sandfort::compat::e2b
