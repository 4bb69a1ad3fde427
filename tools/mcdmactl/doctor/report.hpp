// How `mcdmactl doctor` prints its results.
//
// Text, for people (may change between versions): one line per check,
// "[ ok ] id: summary" ("[warn]", "[fail]", "[skip]"); under a warn or fail
// its detail and a "fix: ..." line, indented; then a verdict line.
//
// JSON, for scripts: one line, {"healthy": bool, "checks": [{"id",
// "verdict" ("ok"|"warn"|"fail"|"skip"), "summary", "detail", "fix"}]},
// every key always present (empty strings when there is nothing to say),
// checks in the order doctor_checks.hpp gives. `peers` and `path_mtu` may
// appear once per link.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "doctor/checks.hpp"

namespace mcdma::tools::doctor {

std::string RenderJson(const std::vector<CheckResult>& results);
void RenderText(const std::vector<CheckResult>& results, std::ostream& out);

}  // namespace mcdma::tools::doctor
