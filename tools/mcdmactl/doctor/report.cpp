#include "doctor/report.hpp"

#include <cstdio>

#include "render.hpp"

namespace mcdma::tools::doctor {
namespace {

const char* Tag(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk:
      return "[ ok ]";
    case Verdict::kWarn:
      return "[warn]";
    case Verdict::kFail:
      return "[fail]";
    case Verdict::kSkip:
      return "[skip]";
  }
  return "[fail]";
}

// `text` with every line after the first indented like the first.
void Indented(const std::string& indent, const std::string& text, std::ostream& out) {
  out << indent;
  for (char c : text) {
    out << c;
    if (c == '\n') out << indent;
  }
  out << '\n';
}

}  // namespace

std::string RenderJson(const std::vector<CheckResult>& results) {
  std::string out = "{\"healthy\":";
  out += Healthy(results) ? "true" : "false";
  out += ",\"checks\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const CheckResult& r = results[i];
    if (i != 0) out += ",";
    out += "{\"id\":" + JsonString(r.id) + ",\"verdict\":\"" + VerdictName(r.verdict) +
           "\",\"summary\":" + JsonString(r.summary) + ",\"detail\":" + JsonString(r.detail) +
           ",\"fix\":" + JsonString(r.fix) + "}";
  }
  return out + "]}";
}

void RenderText(const std::vector<CheckResult>& results, std::ostream& out) {
  std::string failed;
  size_t warnings = 0;
  for (const CheckResult& r : results) {
    out << Tag(r.verdict) << ' ' << r.id << ": " << r.summary << '\n';
    if (r.verdict != Verdict::kWarn && r.verdict != Verdict::kFail) continue;
    if (!r.detail.empty()) Indented("       ", r.detail, out);
    if (!r.fix.empty()) Indented("       ", "fix: " + r.fix, out);
    if (r.verdict == Verdict::kWarn) ++warnings;
    if (r.verdict == Verdict::kFail) failed += (failed.empty() ? "" : ", ") + r.id;
  }
  if (failed.empty()) {
    out << "healthy" << (warnings == 0 ? "" : " (" + std::to_string(warnings) + " warning(s))")
        << '\n';
  } else {
    out << "unhealthy: failed " << failed << '\n';
  }
}

}  // namespace mcdma::tools::doctor
