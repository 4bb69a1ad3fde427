// The daemon's TOML configuration (daemon/src/config/options.cpp through the
// option table, option_table.cpp): the input is written to a config file
// and loaded over the defaults as --config does, then checked with
// Validate; every option of a file that loads and validates must print and
// copy through its table row, and pass its bounds check again.
#include <cstdlib>
#include <string>

#include "config/option_table.hpp"
#include "config/options.hpp"
#include "fuzz_support.hpp"

using namespace mcdma;
using namespace mcdma::daemon;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = mcdma::fuzz::ScratchDir() + "/rpcd.toml";
  if (!mcdma::fuzz::WriteFile(path, {data, size})) std::abort();
  Options options;
  Status loaded = LoadTomlFile(path, options);
  if (!loaded.ok()) {
    if (loaded.message().empty()) std::abort();  // a refusal says what was wrong
    return 0;
  }
  if (!Validate(options).ok()) return 0;
  Options copy;
  for (const OptionSpec& row : OptionTable()) {
    (void)OptionValueText(row, options);
    CopyOption(row, options, copy);
    if (!CheckBounds(row, copy).ok()) std::abort();  // Validate passed these bounds
    if (OptionValueText(row, copy) != OptionValueText(row, options)) std::abort();
  }
  for (size_t i = 0; i < options.peers.size(); ++i) {
    if (!ValidatePeer(options.peers[i], "peer[" + std::to_string(i) + "]").ok()) std::abort();
  }
  return 0;
}
