// Rendering of Admin replies for mcdmactl: stable JSON for scripts, aligned
// text for people.
//
// JSON is the proto3 JSON mapping of the reply, one object per line, with
// proto field names (snake_case) and every field present even when zero or
// empty, so a script can rely on the keys. As the mapping prescribes, 64-bit
// integers are JSON strings. Fields are only ever added (admin.proto is
// versioned that way), so scripts should ignore keys they do not know.
//
// Failure: rendering only fails if protobuf cannot serialize the message
// (kInternal); nothing throws.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "mcdma/status.hpp"
#include "mcdma/v1/admin.pb.h"

namespace mcdma::tools {

enum class OutputFormat { kText, kJson };

Status RenderStatus(const v1::StatusReply& reply, OutputFormat format, std::ostream& out);
Status RenderSessions(const v1::SessionsReply& reply, OutputFormat format, std::ostream& out);
Status RenderExports(const v1::ExportsReply& reply, OutputFormat format, std::ostream& out);
Status RenderBuffers(const v1::BuffersReply& reply, OutputFormat format, std::ostream& out);

// `message` in the JSON form described above, without a newline; WriteJson
// prints it as one line.
Result<std::string> ToJson(const google::protobuf::Message& message);
Status WriteJson(const google::protobuf::Message& message, std::ostream& out);

// Text helpers, exposed for tests. FormatBytes picks a binary unit
// ("512 B", "4.0 KiB", "16.0 GiB"); FormatMiB always uses MiB ("12.0 MiB");
// FormatDuration gives "4.2s" under a minute, else "3m 05s" ... "1d 02h 03m 04s".
// A JSON string literal: quotes, backslashes and control characters escaped.
std::string JsonString(const std::string& s);
std::string FormatBytes(uint64_t bytes);
// A decimal integer.
std::string Num(uint64_t value);
std::string FormatDuration(double seconds);
std::string FormatMiB(uint64_t bytes);

}  // namespace mcdma::tools
