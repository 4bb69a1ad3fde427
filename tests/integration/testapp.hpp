// mcdma_testapp: the client processes of the integration tests. One binary,
// one role per run (argv[1]); each role is a function in testapp_*.cpp.
//
// Protocol with the test: a role prints one line per event on stdout and
// flushes it (READY, progress, a final JSON line); diagnostics go to stderr.
// Roles that wait ("serve", "fill") exit when their stdin reaches EOF, so a
// test that dies takes them with it even without PR_SET_PDEATHSIG.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "mcdma/client.hpp"

namespace mcdma::itest {

// "--key value" pairs after the role; a flag given without a value is "1".
class Args {
 public:
  static bool Parse(int argc, char** argv, Args& out, std::string& error);
  bool Has(const std::string& key) const { return values_.count(key) != 0; }
  std::string Str(const std::string& key, const std::string& def = "") const;
  uint64_t U64(const std::string& key, uint64_t def = 0) const;
  // The value of a required key; exits with status 2 when missing.
  std::string Need(const std::string& key) const;

 private:
  std::map<std::string, std::string> values_;
};

// Thread-safe: prints one line on stdout and flushes it.
void Say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Connects with the options every role uses (socket from --socket).
std::unique_ptr<Client> ConnectOrDie(const Args& args, const char* role,
                                     ClientOptions options = {});

// Blocks until stdin reaches EOF (the test closed it or died).
void WaitForStdinEof();

// "code":count pairs of a map, as JSON object members.
std::string JsonCounts(const std::map<std::string, uint64_t>& counts);

// Roles.
int RunServe(const Args& args);
int RunCall(const Args& args);
int RunFill(const Args& args);
int RunWrite(const Args& args);
int RunVerifyRead(const Args& args);
int RunSustain(const Args& args);
int RunGarbage(const Args& args);
int RunPeerLoad(const Args& args);
int RunPeerRaw(const Args& args);
int RunResilientServe(const Args& args);
int RunResilientLoad(const Args& args);

// The steady clock in nanoseconds: the roles' timestamps and durations.
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace mcdma::itest
