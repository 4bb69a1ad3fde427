#include "local_report.hpp"

#include <optional>

#include "harness/files.hpp"

namespace mcdma::bench {

using harness::Fixed;
using harness::FormatBytes;
using harness::Row;
using harness::Verdict;

Verdict EvaluateTarget(const std::vector<Row>& rows, const std::vector<size_t>& payloads,
                       const Target& target) {
  bool measured = !payloads.empty();
  bool met = true;
  std::string detail;
  for (size_t payload : payloads) {
    const Row* o = harness::FindRow(rows, target.other, payload);
    std::optional<double> ratio =
        o ? harness::RatioToReference(rows, *o, target.reference) : std::nullopt;
    if (!detail.empty()) detail += ", ";
    detail += FormatBytes(payload) + ": ";
    if (!ratio.has_value()) {
      measured = false;
      detail += "not measured";
      continue;
    }
    double r = ratio.value_or(0);
    detail += Fixed(r, target.at_most ? 2 : 1) + "x";
    if (target.at_most ? r > target.factor : r < target.factor) met = false;
  }
  return harness::MakeVerdict("", target.description, measured, met, detail);
}

Status WriteJson(const std::string& path, const Plan& plan, const std::vector<Row>& rows,
                 const std::string& reference, const std::vector<Verdict>& verdicts) {
  std::string j = "{\n";
  j += "  \"benchmark\": \"local_call\",\n";
  j += harness::RunJson(plan.iterations, plan.warmup, plan.payloads, plan.daemon_path);
  j += "  \"results\": [\n" + harness::CallRowsJson(rows, reference) + "  ],\n";
  j += "  \"targets\": [\n" + harness::VerdictsJson(verdicts) + "  ]\n";
  j += "}\n";
  return harness::WriteFile(path, j);
}

}  // namespace mcdma::bench
