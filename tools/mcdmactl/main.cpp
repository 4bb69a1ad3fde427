// mcdmactl: administer the host's mcdma-rpcd through its Admin gRPC service.
// Everything but the last-resort catch lives in cli.cpp (see cli.hpp for the
// exit codes).
#include <exception>
#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) {
  // Nothing in RunCli throws by design; this turns a bug (e.g. bad_alloc)
  // into exit code 1 with a message instead of an abort.
  try {
    return mcdma::tools::RunCli(argc, argv, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "mcdmactl: internal error: " << e.what() << '\n';
    return mcdma::tools::kExitFailure;
  }
}
