#include "stop_signals.hpp"

#include <pthread.h>
#include <signal.h>

#include <cstring>

namespace mcdma::daemon {
namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockStopSignals() {
  sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::string WaitForStopSignal() {
  sigset_t set = StopSignals();
  int sig = 0;
  sigwait(&set, &sig);
  return strsignal(sig);
}

}  // namespace mcdma::daemon
