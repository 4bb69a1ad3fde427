#include "render.hpp"

#include <google/protobuf/util/json_util.h>

#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "table.hpp"

namespace mcdma::tools {
namespace {

std::string YesNo(bool value) { return value ? "yes" : "no"; }

std::string Access(bool read, bool write) {
  std::string access;
  access += read ? 'r' : '-';
  access += write ? 'w' : '-';
  return access;
}

std::string JoinPeers(const google::protobuf::RepeatedPtrField<std::string>& peers) {
  // Empty means only apps on this host may resolve the export (control.proto).
  if (peers.empty()) return "(local)";
  std::string joined;
  for (const auto& peer : peers) {
    if (!joined.empty()) joined += ',';
    joined += peer;
  }
  return joined;
}

// "key   value" lines with the values aligned; the key column is sized to the
// longest key of the status block so the block reads as one table.
void Field(std::ostream& out, const char* key, const std::string& value) {
  constexpr int kKeyWidth = 21;
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "%-*s", kKeyWidth, key);
  // "-" rather than nothing, so no line ends in padding.
  out << prefix << (value.empty() ? "-" : value) << '\n';
}

void PrintOps(const v1::StatusReply& reply, std::ostream& out) {
  Table table({{"OP"}, {"SUBMITTED", true}, {"OK", true}, {"FAILED", true}, {"BYTES", true}});
  for (const auto& op : reply.ops()) {
    table.AddRow(
        {op.op(), Num(op.submitted()), Num(op.ok()), Num(op.failed()), FormatBytes(op.bytes())});
  }
  out << "operations:\n";
  if (table.empty()) {
    out << "  (none)\n";
  } else {
    table.Print(out, "  ");
  }
}

void PrintTransports(const v1::StatusReply& reply, std::ostream& out) {
  Table table({{"NAME"},
               {"ONE-SIDED"},
               {"MAX-OUTSTANDING", true},
               {"MAX-TRANSFER", true},
               {"MAX-REGISTRATION", true}});
  for (const auto& t : reply.transports()) {
    table.AddRow({t.name(), YesNo(t.one_sided()), Num(t.max_outstanding()),
                  FormatBytes(t.max_transfer_bytes()), FormatBytes(t.max_registration_bytes())});
  }
  out << "transports:\n";
  if (table.empty()) {
    out << "  (none)\n";
  } else {
    table.Print(out, "  ");
  }
}

}  // namespace

Result<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return Status(Code::kInternal, "JSON encoding failed: " + std::string(status.message()));
  }
  return json;
}

Status WriteJson(const google::protobuf::Message& message, std::ostream& out) {
  auto json = ToJson(message);
  if (!json.ok()) return json.status();
  out << *json << '\n';
  return Status::Ok();
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string Num(uint64_t value) { return std::to_string(value); }

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string FormatMiB(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

std::string FormatDuration(double seconds) {
  // A daemon's clock never runs backwards, but a reply is untrusted input.
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  char text[64];
  if (seconds < 60) {
    std::snprintf(text, sizeof(text), "%.1fs", seconds);
    return text;
  }
  auto total = static_cast<uint64_t>(seconds);
  const uint64_t days = total / 86400;
  const uint64_t hours = total / 3600 % 24;
  const uint64_t minutes = total / 60 % 60;
  const uint64_t secs = total % 60;
  if (days > 0) {
    std::snprintf(text, sizeof(text), "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s",
                  days, hours, minutes, secs);
  } else if (hours > 0) {
    std::snprintf(text, sizeof(text), "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", hours, minutes,
                  secs);
  } else {
    std::snprintf(text, sizeof(text), "%" PRIu64 "m %02" PRIu64 "s", minutes, secs);
  }
  return text;
}

Status RenderStatus(const v1::StatusReply& reply, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) return WriteJson(reply, out);
  Field(out, "version", reply.version());
  Field(out, "host", reply.host_id());
  Field(out, "pid", Num(reply.pid()));
  Field(out, "uptime", FormatDuration(reply.uptime_s()));
  Field(out, "state", reply.state());
  Field(out, "socket", reply.socket());
  Field(out, "sessions", Num(reply.sessions()));
  Field(out, "buffers", Num(reply.buffers()) + " (" + FormatMiB(reply.buffer_bytes()) + ")");
  Field(out, "exports", Num(reply.exports()));
  Field(out, "services", Num(reply.services()));
  Field(out, "inflight", Num(reply.inflight()));
  Field(out, "invalid descriptors", Num(reply.invalid_descriptors()));
  Field(out, "ring faults", Num(reply.ring_faults()));
  Field(out, "reaped sessions", Num(reply.sessions_reaped()));
  out << '\n';
  PrintOps(reply, out);
  out << '\n';
  PrintTransports(reply, out);
  return Status::Ok();
}

Status RenderSessions(const v1::SessionsReply& reply, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) return WriteJson(reply, out);
  if (reply.sessions().empty()) {
    out << "no sessions\n";
    return Status::Ok();
  }
  Table table({{"ID", true},
               {"APP"},
               {"PID", true},
               {"UID", true},
               {"AGE", true},
               {"BUFFERS", true},
               {"BUF-SIZE", true},
               {"EXPORTS", true},
               {"SERVICES", true},
               {"HANDLES", true},
               {"INFLIGHT", true},
               {"SUBMITTED", true},
               {"INVALID", true},
               {"FAULTS", true},
               {"BACKLOG", true},
               {"MAILBOX"}});
  for (const auto& s : reply.sessions()) {
    // The daemon unlinks a segment once the app has mapped it; one that stays
    // linked points at an app that never finished attaching.
    std::string mailbox = s.mailbox_segment() + (s.mailbox_linked() ? " (linked)" : "");
    table.AddRow({Num(s.session_id()), s.app_name(), Num(s.pid()), Num(s.uid()),
                  FormatDuration(s.age_s()), Num(s.buffers()), FormatBytes(s.buffer_bytes()),
                  Num(s.exports()), Num(s.services()), Num(s.remote_handles()), Num(s.inflight()),
                  Num(s.submitted()), Num(s.invalid_descriptors()), Num(s.ring_faults()),
                  Num(s.backlog()), std::move(mailbox)});
  }
  table.Print(out);
  return Status::Ok();
}

Status RenderExports(const v1::ExportsReply& reply, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) return WriteJson(reply, out);
  if (reply.exports().empty()) {
    out << "no exports\n";
    return Status::Ok();
  }
  Table table({{"ID", true},
               {"NAME"},
               {"SESSION", true},
               {"BUFFER", true},
               {"OFFSET", true},
               {"LENGTH", true},
               {"ACCESS"},
               {"EXPIRES", true},
               {"RESOLVED", true},
               {"PEERS"}});
  for (const auto& e : reply.exports()) {
    std::string expires = e.expires_in_ms() < 0 ? "never" : FormatDuration(e.expires_in_ms() / 1e3);
    table.AddRow({Num(e.export_id()), e.name(), Num(e.owner_session()), Num(e.buffer_id()),
                  Num(e.offset()), FormatBytes(e.length()), Access(e.allow_read(), e.allow_write()),
                  std::move(expires), Num(e.resolved_handles()), JoinPeers(e.allowed_peers())});
  }
  table.Print(out);
  return Status::Ok();
}

Status RenderBuffers(const v1::BuffersReply& reply, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) return WriteJson(reply, out);
  if (reply.buffers().empty()) {
    out << "no buffers\n";
    return Status::Ok();
  }
  Table table(
      {{"ID", true}, {"SESSION", true}, {"SIZE", true}, {"REGISTRATIONS", true}, {"SEGMENT"}});
  for (const auto& b : reply.buffers()) {
    std::string segment = b.segment() + (b.segment_linked() ? " (linked)" : "");
    table.AddRow({Num(b.buffer_id()), Num(b.owner_session()), FormatBytes(b.size()),
                  Num(b.registrations()), std::move(segment)});
  }
  table.Print(out);
  return Status::Ok();
}

}  // namespace mcdma::tools
