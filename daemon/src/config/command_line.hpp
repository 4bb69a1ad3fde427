// mcdma-rpcd's command line: one flag per OptionTable() row, plus --config,
// --peer, --rail and --reserve (repeatable), --check and --version. Flags
// override the file.
#pragma once

#include <CLI/CLI.hpp>
#include <variant>

#include "config/options.hpp"

namespace mcdma::daemon {

// Registers one flag per OptionTable() row, bound to that row's field of
// `flags`; --help prints each with its help text, TOML key and default (the
// field's value in `flags` when this is called).
void AddOptionFlags(CLI::App& app, Options& flags);

// Copies the options whose flags were given on the command line from
// `flags` to `options`.
void ApplyGivenFlags(const CLI::App& app, const Options& flags, Options& options);

// Parses "NAME=HOST[:PORT][,TRANSPORT]" (--peer).
Result<PeerConfig> ParsePeerFlag(const std::string& text);

// Parses --rail's ADDRESS (an IPv4 or IPv6 literal): a tcp rail whose name
// Validate() defaults to "tcp:ADDRESS".
Result<RailConfig> ParseRailFlag(const std::string& text);

// What the command line asks for.
struct CommandLine {
  Options options;          // the file, the flags over it, validated
  bool check_only = false;  // --check: validate, print, exit
};

// Parses argv, loads --config and validates the result. Returns the exit
// code instead when there is nothing to run: 0 after --help or --version,
// 2 after a usage or configuration error (printed to stderr, naming the
// flag or key).
std::variant<CommandLine, int> ParseCommandLine(int argc, const char* const* argv);

// --check: opens the fabric key if one is set, prints the configuration's
// summary; returns the exit code (0, or 2 naming the problem).
int PrintCheck(const Options& options);

}  // namespace mcdma::daemon
