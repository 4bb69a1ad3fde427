// A started engine with the loop device, for the fuzzers that drive the
// engine's submission, link and peer paths through its public interface.
//
// Threads: the engine runs its own thread; everything that touches engine
// state or the devices goes through Engine::Run, as a gRPC handler's work
// does.
#pragma once

#include <memory>

#include "driver/transport.hpp"
#include "engine/engine.hpp"

namespace mcdma::fuzz {

// One engine for the process: loop device for sessions, and (Get) a second
// loop device in the tcp slot so links can be installed with an in-process
// peer (the harness holds the other end), or (GetWithoutLinks) none, as a
// daemon without peering has. Small rings and slots keep each input cheap.
class FuzzEngine {
 public:
  static FuzzEngine& Get();
  static FuzzEngine& GetWithoutLinks();
  daemon::Engine& engine() { return *engine_; }
  // The device in the tcp slot (Get only); engine thread only (inside Run).
  driver::Device& link_device() { return *link_device_; }
  // Runs nothing on the engine thread: returns once every command posted
  // before it has run and one more round of the loop has begun.
  void Barrier();

 private:
  explicit FuzzEngine(bool link_device);
  std::unique_ptr<daemon::Engine> engine_;
  driver::Device* link_device_ = nullptr;
};

}  // namespace mcdma::fuzz
