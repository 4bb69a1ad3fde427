// The main() of a test binary that runs one role per process
// (mcdma_testapp, mcdma_soak): `PROGRAM ROLE --key value ...`, the
// arguments as "--key value" pairs, and one line per event on stdout.
//
// Threading: Args is read-only once parsed; Say is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mcdma::harness {

// "--key value" pairs after the role; a flag given without a value is "1".
class Args {
 public:
  // False (with `error`) for anything that is not "--key [value]".
  static bool Parse(const std::string& program, int argc, char** argv, Args& out,
                    std::string& error);
  bool Has(const std::string& key) const { return values_.count(key) != 0; }
  std::string Str(const std::string& key, const std::string& def = "") const;
  uint64_t U64(const std::string& key, uint64_t def = 0) const;
  double Double(const std::string& key, double def) const;
  // The value of a required key; exits with status 2 when missing.
  std::string Need(const std::string& key) const;

 private:
  std::string program_;
  std::map<std::string, std::string> values_;
};

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitList(const std::string& list);

// Prints one line on stdout and flushes it (printf format).
void Say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

using Role = int (*)(const Args&);
// Runs the role argv[1] names with the arguments after it: its exit code,
// or 2 (said on stderr, with `usage` when there is no role) for an unknown
// role or arguments that do not parse. SIGPIPE is ignored first: a write to
// a peer that died fails with EPIPE instead of killing the role.
int RoleMain(const char* program, const char* usage, const std::map<std::string, Role>& roles,
             int argc, char** argv);

}  // namespace mcdma::harness
