// The pattern hand-off shared by mcdma-kv-handoff (demo/kv/kv_handoff.cpp)
// and mcdma-cuda-check (gpu/cuda_check.cpp): the two subcommands and their
// options, offering layers as a hand-off and publishing them one by one,
// and pulling one, each step printed as one line.
//
// The pattern: layer L is 64-bit little-endian words, word i =
// i * kGolden + L (tests/python/test_kv_cross.py writes the same), named
// in the manifest so a consumer refuses any other hand-off.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mcdma/client.hpp"
#include "mcdma/kv.hpp"

namespace mcdma::demo {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

struct HandoffOptions {
  std::string socket;
  std::string id;
  std::string peer;
  std::vector<std::string> allow;
  uint32_t layers = 4;
  uint64_t layer_bytes = 1 << 20;
  int timeout_ms = 60000;
  bool checksum = false;  // produce: publish each layer's XXH3-64
};

// The tool's `produce` and `consume` subcommands, with the options above
// (the caller adds its own to them).
struct HandoffCommands {
  CLI::App* produce;
  CLI::App* consume;
};
HandoffCommands AddHandoffCommands(CLI::App& app, HandoffOptions& o);

// Prints "<tool>: <what>: <status>" on stderr; returns 1.
int Fail(const char* tool, const char* what, const Status& st);

// Offers `layers` as hand-off o.id to o.allow, publishes them in order and
// waits until one consumer has them all. Returns the exit code.
int OfferAndPublish(const char* tool, Client& client, const HandoffOptions& o,
                    const std::vector<Buffer>& layers);

// Opens hand-off o.id from o.peer (its manifest must name the pattern) and
// pulls every layer into `pool`'s buffers.
Result<std::unique_ptr<kv::Import>> OpenAndPull(Client& client, const HandoffOptions& o,
                                                kv::BufferPool& pool);

// Connects to o.socket as `tool`; runs the subcommand that was parsed.
int RunHandoffCommand(const char* tool, const HandoffCommands& commands, const HandoffOptions& o,
                      int (*produce)(Client&, const HandoffOptions&),
                      int (*consume)(Client&, const HandoffOptions&));

// main(): runs main_fn, turning an exception into "<tool>: <what>" and 1.
int GuardedMain(const char* tool, int (*main_fn)(int, char**), int argc, char** argv);

}  // namespace mcdma::demo
