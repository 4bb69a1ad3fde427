#include "links_cmd.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "link_render.hpp"

namespace mcdma::tools {
namespace {

// Payload bytes and round trips of `link test` unless given (admin.proto's
// defaults, sent explicitly so the summary can name them).
constexpr uint32_t kDefaultTestBytes = 64;
constexpr uint32_t kDefaultTestCount = 10;

// Parsed arguments of the link subcommands, shared with their actions.
struct LinkArgs {
  std::string peer;
  std::string address;
  std::string transport = "auto";
  uint32_t bytes = kDefaultTestBytes;
  uint32_t count = kDefaultTestCount;
};

int ListLinks(const char* command, AdminClient& client, OutputFormat format, Streams io) {
  return Report(command, client, client.ListLinks(), &RenderLinks, format, io);
}

// `command` names the subcommand in error messages ("links", "link list").
void AddListCommand(CLI::App& parent, const char* name, const char* command,
                    const char* description, bool& json, Action& chosen) {
  CLI::App* sub = parent.add_subcommand(name, description);
  sub->add_flag("--json", json,
                "Print the reply as one JSON object (snake_case keys, all fields present)");
  sub->callback([&chosen, command] {
    chosen = [command](AdminClient& c, OutputFormat f, Streams io) {
      return ListLinks(command, c, f, io);
    };
  });
}

void AddAddCommand(CLI::App& link, const std::shared_ptr<LinkArgs>& args, Action& chosen) {
  CLI::App* add = link.add_subcommand(
      "add", "Link this host to PEER now (not written to the config; needs a fabric key)");
  add->add_option("PEER", args->peer, "The peer's host id")->required();
  add->add_option("ADDRESS", args->address,
                  "The peer's service address, host[:port] (default port 7471)")
      ->required();
  add->add_option("--transport", args->transport, "Data transport; auto lets the daemon choose")
      ->check(CLI::IsMember({"auto", "tcp", "verbs"}));
  add->callback([&chosen, args] {
    chosen = [args](AdminClient& c, OutputFormat, Streams io) {
      auto added = c.AddLink(args->peer, args->address, args->transport);
      if (!added.ok()) {
        ReportFailure("link add", c, added.status(), io.err);
        return kExitFailure;
      }
      io.out << "link to " << args->peer << " added (" << args->address << ", transport "
             << args->transport << ")\n";
      return FinishOutput("link add", io);
    };
  });
}

void AddRemoveCommand(CLI::App& link, const std::shared_ptr<LinkArgs>& args, Action& chosen) {
  CLI::App* remove = link.add_subcommand(
      "remove", "Drop the link to PEER; its operations in flight fail with PEER_GONE");
  remove->add_option("PEER", args->peer, "The peer's host id")->required();
  remove->callback([&chosen, args] {
    chosen = [args](AdminClient& c, OutputFormat, Streams io) {
      auto removed = c.RemoveLink(args->peer);
      if (!removed.ok()) {
        ReportFailure("link remove", c, removed.status(), io.err);
        return kExitFailure;
      }
      io.out << "link to " << args->peer << " removed\n";
      return FinishOutput("link remove", io);
    };
  });
}

void AddTestCommand(CLI::App& link, const std::shared_ptr<LinkArgs>& args, bool& json,
                    Action& chosen) {
  constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();
  CLI::App* test = link.add_subcommand(
      "test", "Echo payloads over the link to PEER, verify every byte and time each round trip");
  test->add_option("PEER", args->peer, "The peer's host id")->required();
  test->add_option("--bytes", args->bytes, "Payload bytes per round trip, at least 1")
      ->type_name("N")
      ->check(CLI::Range(uint32_t{1}, kMax).description(""));
  test->add_option("--count", args->count,
                   "Round trips, at least 1; all must finish within --timeout")
      ->type_name("N")
      ->check(CLI::Range(uint32_t{1}, kMax).description(""));
  test->add_flag("--json", json,
                 "Print request, reply and min_us/p50_us/max_us as one JSON object");
  test->callback([&chosen, args] {
    chosen = [args](AdminClient& c, OutputFormat f, Streams io) {
      v1::LinkTestRequest request;
      request.set_peer(args->peer);
      request.set_bytes(args->bytes);
      request.set_count(args->count);
      return Report(
          "link test", c, c.TestLink(request),
          [&request](const v1::LinkTestReply& reply, OutputFormat format, std::ostream& out) {
            return RenderLinkTest(request, reply, format, out);
          },
          f, io);
    };
  });
}

}  // namespace

void AddLinkCommands(CLI::App& app, bool& json, Action& chosen) {
  AddListCommand(app, "links", "links",
                 "Links to peer hosts: state, transport, round trip, traffic", json, chosen);
  CLI::App* link = app.add_subcommand("link", "List, add, remove and test links to peer hosts");
  link->require_subcommand(1);
  auto args = std::make_shared<LinkArgs>();
  AddListCommand(*link, "list", "link list", "Same as `mcdmactl links`", json, chosen);
  AddAddCommand(*link, args, chosen);
  AddRemoveCommand(*link, args, chosen);
  AddTestCommand(*link, args, json, chosen);
}

}  // namespace mcdma::tools
