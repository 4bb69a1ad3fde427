#include "validate/validate_cmd.hpp"

#include <memory>

#include "validate/validate_flags.hpp"

namespace mcdma::tools {

void AddValidateCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                        LocalCommand& chosen) {
  auto flags = std::make_shared<validate::Flags>();
  CLI::App* sub = app.add_subcommand(
      "validate",
      "Check and measure the link to PEER through both daemons, beside perftest on the same "
      "devices, and write a report (run `mcdmactl validate --serve` on PEER first)");
  sub->add_option("peer", flags->peer, "The peer host id (as `mcdmactl links` shows it)");
  sub->add_flag("--serve", flags->serve,
                "Be the responder on the peer: echo, reverse calls, perftest servers, a buffer");
  sub->add_option("--serve-seconds", flags->serve_seconds,
                  "With --serve: stop after this many seconds (0: at SIGINT/SIGTERM)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--allow", flags->allow,
                  "With --serve: the hosts that may use the buffer (default: the peers linked now)")
      ->delimiter(',');
  sub->add_option("--buffer", flags->buffer, "With --serve: the exported buffer's size");
  sub->add_option("--sizes", flags->sizes, "Latency sizes (bytes; K, M suffixes)")->delimiter(',');
  sub->add_option("--samples", flags->samples, "Latency samples kept per row")
      ->check(CLI::Range(1, 1'000'000));
  sub->add_option("--warmup", flags->warmup, "Latency round trips first, not kept")
      ->check(CLI::Range(0, 1'000'000));
  sub->add_option("--bw-total", flags->bw_total, "Bytes per bandwidth row");
  sub->add_option("--bw-op", flags->bw_op, "Bytes per bandwidth operation");
  sub->add_option("--bw-depth", flags->bw_depth, "Bandwidth operations in flight")
      ->check(CLI::Range(1, 64));
  sub->add_flag("--skip-doctor", flags->skip_doctor, "Leave out `mcdmactl doctor`'s checks");
  sub->add_option("--config", flags->config,
                  "The daemon's config file for doctor's checks (as `mcdmactl doctor --config`)")
      ->type_name("FILE");
  sub->add_flag("--skip-perftest", flags->skip_perftest, "Leave out perftest");
  sub->add_option("--perftest-limit", flags->perftest_limit_s,
                  "Seconds one perftest client may run")
      ->check(CLI::Range(1, 3600));
  sub->add_option("--out", flags->out, "Write report.txt, report.json and samples.csv to DIR")
      ->type_name("DIR");
  sub->add_flag("--json", flags->json, "Print the report as one JSON object");
  sub->callback([&chosen, &socket, &timeout_ms, flags] {
    if (flags->serve == !flags->peer.empty()) {
      throw CLI::ValidationError("validate",
                                 flags->serve ? "--serve takes no PEER" : "give PEER, or --serve");
    }
    chosen = [flags, &socket, &timeout_ms](std::ostream& out, std::ostream& err) {
      return flags->serve ? validate::Serve(*flags, socket, timeout_ms, out, err)
                          : validate::Run(*flags, socket, timeout_ms, out, err);
    };
  });
}

}  // namespace mcdma::tools
