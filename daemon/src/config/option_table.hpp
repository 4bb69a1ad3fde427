// The one table of mcdma-rpcd's scalar options. Each row names an option
// once: its TOML key (with its section), its command-line flag, the Options
// field it sets (whose type is the option's type and whose initializer is
// its default), its help text and its bounds. The TOML loader, the flags,
// `--help` and the range checks in Validate() all read this table, so adding
// an option is one row here plus its field in Options.
//
// The [[peer]], [[rail]] and [[reserve]] lists (--peer, --rail, --reserve)
// are not scalars and have their own code; checks that relate two fields
// (arena_bytes <= max_arena_bytes, tls.cert with tls.key, ...) and checks of
// a value's syntax (socket path, host:port, IP address) stay in Validate().
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "config/options.hpp"
#include "mcdma/status.hpp"

namespace mcdma::daemon {

// The Options field a row sets; its type is the option's type.
using OptionField = std::variant<std::string Options::*, uint32_t Options::*, uint64_t Options::*,
                                 int32_t Options::*>;

// What Validate() checks of a row's value.
struct OptionBounds {
  enum class Kind : uint8_t {
    kNone,        // any value of the field's type
    kRange,       // min <= value <= max (integers)
    kPowerOfTwo,  // a power of two in [min, max] (integers)
    kOneOf,       // one of `choices` (strings)
    kEmptyOrOneOf,
  };
  Kind kind = Kind::kNone;
  int64_t min = 0;
  int64_t max = 0;
  std::span<const std::string_view> choices = {};
};

inline constexpr int64_t kNoMax = INT64_MAX;

struct OptionSpec {
  std::string_view key;   // TOML key: "name" or "section.name"
  std::string_view flag;  // long flag, with its dashes: "--name"
  OptionField field;
  std::string_view help;  // for --help; the default is printed after it
  OptionBounds bounds = {};
};

// Every scalar option, in the order --help lists them.
std::span<const OptionSpec> OptionTable();

// The row whose TOML key is `key`; nullptr if none.
const OptionSpec* FindOption(std::string_view key);

// Checks the row's bounds on `options`; the error names the key and the
// value.
Status CheckBounds(const OptionSpec& row, const Options& options);

// Copies the row's field from `from` to `to`.
void CopyOption(const OptionSpec& row, const Options& from, Options& to);

// The row's value in `options` as text ("50", "info").
std::string OptionValueText(const OptionSpec& row, const Options& options);

}  // namespace mcdma::daemon
