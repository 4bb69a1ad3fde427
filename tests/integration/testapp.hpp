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
#include <mutex>
#include <string>

#include "harness/role_main.hpp"
#include "mcdma/client.hpp"

namespace mcdma::itest {

// "--key value" pairs after the role (harness/role_main.hpp).
using harness::Args;
// Thread-safe: prints one line on stdout and flushes it.
using harness::Say;
using harness::SplitList;

// Connects with the options every role uses (socket from --socket).
std::unique_ptr<Client> ConnectOrDie(const Args& args, const char* role,
                                     ClientOptions options = {});

// Blocks until stdin reaches EOF (the test closed it or died).
void WaitForStdinEof();

// "code":count pairs of a map, as JSON object members.
std::string JsonCounts(const std::map<std::string, uint64_t>& counts);

// Progress lines ("CALLS 17"): the first, then at most one every 50 ms.
// Thread-safe: any worker may Tick.
class Progress {
 public:
  explicit Progress(const char* what) : what_(what) {}
  void Tick(uint64_t n);

 private:
  const char* what_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};  // GUARDED_BY(mu_)
};

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
int RunPeerRogue(const Args& args);
int RunResilientServe(const Args& args);
int RunResilientLoad(const Args& args);

// The steady clock in nanoseconds: the roles' timestamps and durations.
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace mcdma::itest
