#include "fuzz_engine.hpp"

#include <cstdlib>

#include "driver/loop/loop_transport.hpp"
#include "fuzz_support.hpp"

namespace mcdma::fuzz {

// Never destroyed: the engine thread runs until the process exits.
FuzzEngine& FuzzEngine::Get() {
  static FuzzEngine* engine = new FuzzEngine(/*link_device=*/true);
  return *engine;
}

FuzzEngine& FuzzEngine::GetWithoutLinks() {
  static FuzzEngine* engine = new FuzzEngine(/*link_device=*/false);
  return *engine;
}

FuzzEngine::FuzzEngine(bool link_device) {
  QuietLogs();
  daemon::Options options;
  options.spin_budget_us = 0;
  options.submission_entries = 8;
  options.completion_entries = 64;
  options.inbox_entries = 64;
  options.arena_bytes = 64 << 10;
  options.max_arena_bytes = 64 << 10;
  options.max_buffer_bytes = 1 << 20;
  options.max_buffers_per_session = 8;
  options.max_ring_faults = 4;
  options.max_backlog = 64;
  options.default_timeout_ms = 1000;
  options.transfer_chunk_bytes = 4096;
  options.link_recv_slots = 8;
  options.link_slot_bytes = 4096;
  options.host_id = "fuzz-host";
  auto loop = driver::loop::CreateLoopDevice();
  if (!loop.ok()) std::abort();
  daemon::Engine::Devices devices{std::move(*loop), nullptr, nullptr};
  if (link_device) {
    auto link = driver::loop::CreateLoopDevice();
    if (!link.ok()) std::abort();
    link_device_ = link->get();
    devices[1] = std::move(*link);
  }
  engine_ = std::make_unique<daemon::Engine>(options, std::move(devices));
  if (!engine_->Start().ok()) std::abort();
}

void FuzzEngine::Barrier() {
  // The first command runs at the start of a round, after which that round
  // consumes the rings; the second one runs only after that round ended.
  (void)engine_->Run([] { return 0; });
  (void)engine_->Run([] { return 0; });
}

}  // namespace mcdma::fuzz
