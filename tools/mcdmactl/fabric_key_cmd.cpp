#include "fabric_key_cmd.hpp"

#include <cstdio>
#include <memory>

#include "cli.hpp"
#include "mcdma_auth/fabric_key.hpp"
#include "render.hpp"

namespace mcdma::tools {
namespace {

// Parsed flags of `fabric-key new`, owned by the CLI::App callbacks.
struct NewKeyFlags {
  std::string path;
  bool force = false;
  bool json = false;
};

}  // namespace

int NewFabricKeyCommand(const std::string& path, bool force, bool json, std::ostream& out,
                        std::ostream& err) {
  Status written = WriteNewFabricKey(path, force);
  if (!written.ok()) {
    err << "mcdmactl: fabric-key new: " << written.ToString() << '\n';
    return kExitFailure;
  }
  // Read it back through the daemon's own checks: what we print is what the
  // daemon will load.
  auto key = LoadFabricKey(path);
  if (!key.ok()) {
    err << "mcdmactl: fabric-key new: wrote " << path
        << " but cannot load it back: " << key.status().ToString() << '\n';
    return kExitFailure;
  }
  if (json) {
    out << "{\"path\":" << JsonString(path) << ",\"fingerprint\":\"" << key->Fingerprint()
        << "\"}\n";
  } else {
    out << "wrote fabric key " << path << " (fingerprint " << key->Fingerprint() << ")\n";
  }
  out.flush();
  if (!out) {
    err << "mcdmactl: fabric-key new: cannot write output\n";
    return kExitFailure;
  }
  return kExitOk;
}

void AddFabricKeyCommands(CLI::App& app, LocalCommand& chosen) {
  CLI::App* group = app.add_subcommand(
      "fabric-key", "Manage the fabric key that daemons use to authenticate each other");
  group->require_subcommand(1);
  CLI::App* create = group->add_subcommand(
      "new",
      "Write a fresh random fabric key to PATH (64 hex digits, mode 0600) and print its "
      "fingerprint; copy the file to every host of the fabric");
  auto flags = std::make_shared<NewKeyFlags>();
  create->add_option("PATH", flags->path, "Where to write the key")->required();
  create->add_flag("--force", flags->force,
                   "Replace an existing key at PATH (atomically); every host then needs the new "
                   "key");
  create->add_flag("--json", flags->json, "Print {\"path\", \"fingerprint\"} as one JSON object");
  create->callback([&chosen, flags] {
    chosen = [flags](std::ostream& out, std::ostream& err) {
      return NewFabricKeyCommand(flags->path, flags->force, flags->json, out, err);
    };
  });
}

}  // namespace mcdma::tools
