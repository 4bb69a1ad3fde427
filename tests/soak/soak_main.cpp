// mcdma_soak's entry point: the mode and its arguments (soak.hpp).
#include "soak.hpp"

int main(int argc, char** argv) {
  return mcdma::harness::RoleMain("mcdma_soak", "run --minutes M [--seed N] | app --socket S ...",
                                  {{"run", mcdma::soak::RunDriver}, {"app", mcdma::soak::RunApp}},
                                  argc, argv);
}
