// What one `mcdmactl doctor` check says. Apart from doctor_checks.hpp so the
// macOS checks (doctor_darwin.hpp) can return it without pulling in the
// daemon options or protobuf.
//
// Threads: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace mcdma::tools::doctor {

enum class Verdict : uint8_t { kOk, kWarn, kFail, kSkip };
// "ok", "warn", "fail", "skip": the JSON values.
const char* VerdictName(Verdict verdict);

struct CheckResult {
  std::string id;  // "config", "rdma_device", ...
  Verdict verdict = Verdict::kOk;
  std::string summary;  // one line
  std::string detail;   // what was seen and why it matters; may be empty
  std::string fix;      // for warn and fail: what to do; else empty
};

// A check's result, as every check writes it.
inline CheckResult Judge(const char* id, Verdict verdict, std::string summary,
                         std::string detail = "", std::string fix = "") {
  return CheckResult{id, verdict, std::move(summary), std::move(detail), std::move(fix)};
}

}  // namespace mcdma::tools::doctor
