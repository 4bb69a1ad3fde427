// Reassembles one link's messages from the fragments that arrive in its
// receive slots (link_wire.hpp: fragments of a message come back to back,
// in order).
//
// Owner: the EngineLink it belongs to; engine thread only. Invariant:
// between messages it holds no bytes. A fragment that breaks the rules is a
// protocol error, after which the engine drops the link and the
// reassembler is not fed again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/link_wire.hpp"
#include "mcdma/status.hpp"

namespace mcdma::daemon {

class Reassembler {
 public:
  struct Message {
    link_wire::Header header;
    std::span<const std::byte> payload;  // valid until the next Feed
  };
  // Feeds one received fragment (header and payload). Returns the message it
  // completes, nullopt while a message is still partial, or a protocol
  // error (LINK_DOWN, the message saying what broke). `limit` is the
  // largest message accepted: nothing larger is buffered.
  Result<std::optional<Message>> Feed(std::span<const std::byte> fragment, uint64_t limit);
  bool partial() const { return partial_; }

 private:
  bool partial_ = false;
  link_wire::Header header_;
  std::string payload_;  // of the partial message
  std::string done_;     // the last completed one, for Message::payload
};

}  // namespace mcdma::daemon
