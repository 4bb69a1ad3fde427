// What `mcdmactl validate` (on this host) and `mcdmactl validate --serve`
// (on the peer) say to each other: over mcdma calls through both daemons,
// so the run needs nothing but the link it validates.
//
//   mcdma.validate.echo     the reply is the request (both ends serve it)
//   mcdma.validate.reverse  "CALLS BYTES HOST": the responder calls
//                           HOST/mcdma.validate.echo CALLS times with BYTES
//                           of random bytes and checks each reply; answers
//                           "ok CALLS" or the error
//   mcdma.validate.perftest "TOOL DEVICE ARGS...": the responder starts
//                           perftest's TOOL server on its DEVICE (one of
//                           the allowed tools, only the allowed arguments)
//                           on a free TCP port and answers, once it listens,
//                           "ok PORT GID_INDEX ADDRESS" (the address of its
//                           device's RoCE v2 IPv4 GID), or the error
//   mcdma.validate.buffer   the responder's export; its bytes start as
//                           Pattern() so a READ checks what the peer wrote
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mcdma::tools::validate {

inline constexpr const char* kEchoService = "mcdma.validate.echo";
inline constexpr const char* kReverseService = "mcdma.validate.reverse";
inline constexpr const char* kPerftestService = "mcdma.validate.perftest";
inline constexpr const char* kBufferExport = "mcdma.validate.buffer";

// Byte i of the responder's buffer before anyone writes it.
inline uint8_t Pattern(uint64_t i) { return static_cast<uint8_t>((i * 131 + 7) ^ (i >> 11)); }

// The perftest tools a responder starts, and whether each is a bandwidth
// tool (its arguments differ).
bool AllowedTool(const std::string& tool);
bool BandwidthTool(const std::string& tool);
// Only these perftest arguments cross: -s N, -n N, -t N, -o N (numbers
// within bounds), -U, --report_gbits. Empty when `args` is acceptable, else
// why not.
std::string CheckPerftestArgs(const std::vector<std::string>& args);

// Splits on blanks.
std::vector<std::string> Words(const std::string& text);

}  // namespace mcdma::tools::validate
