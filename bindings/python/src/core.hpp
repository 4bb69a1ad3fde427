// mcdma._mcdma._Core: one libmcdma session for the Python package. The
// public API is mcdma.Client (mcdma/_client.py), a thin layer over this.
//
// Ownership: a Core owns its mcdma::Client until the Core is destroyed (the
// last Python reference goes), so threads still using it after Close() find
// a closed session, never freed memory. Close() ends the session at once:
// in-flight operations fail with CANCELLED, later ones with UNAVAILABLE.
//
// Threads: every method may be called from any Python thread with the GIL
// held; each releases it while it waits (gil.hpp). Library threads reach
// Python only through calls_ and completions_ (queues.hpp).
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "mcdma/client.hpp"
#include "queues.hpp"

namespace mcdma::python {

// Bytes handed to the library: any contiguous buffer (bytes, bytearray,
// memoryview, numpy array...) or a str (sent as UTF-8). Holds the Python
// buffer for as long as it lives (so it may be read without the GIL).
class InputBytes {
 public:
  explicit InputBytes(const pybind11::handle& obj);
  InputBytes(const InputBytes&) = delete;
  InputBytes& operator=(const InputBytes&) = delete;
  ~InputBytes();
  std::span<const std::byte> span() const { return span_; }

 private:
  Py_buffer view_{};
  bool has_view_ = false;
  std::string utf8_;
  std::span<const std::byte> span_;
};

struct CoreOptions {
  std::string socket;                     // "": the library's default socket
  std::string app_name;                   // "": the program name
  std::optional<double> timeout;          // seconds; None: 30 s
  std::optional<double> connect_timeout;  // seconds; None: 10 s
  int handler_threads = 1;                // library threads that run handlers (>= 1)
};

class Core {
 public:
  static std::shared_ptr<Core> Connect(const CoreOptions& options);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // Ends the session (idempotent): pending Python handlers are answered
  // CANCELLED, in-flight operations fail with CANCELLED, subscriptions and
  // the queues close. Waits only for libmcdma's threads to stop.
  void Close();
  bool closed() const;
  SessionInfo info() const { return info_; }
  int handler_threads() const { return handler_threads_; }

  // ---- calls and notifications (core_calls.cpp) ----
  pybind11::bytes Call(const std::string& service, const pybind11::handle& data,
                       std::optional<double> timeout);
  void CallAsync(const std::string& service, const pybind11::handle& data,
                 std::optional<double> timeout, uint64_t token);
  void Notify(const std::string& service, const pybind11::handle& data,
              std::optional<double> timeout);
  // Handlers run in Python: calls are queued for NextCall with `token`.
  uint64_t Serve(const std::string& service, uint64_t token);
  // Handlers run inline: the library thread that took the call takes the
  // GIL and calls handler(request, call) itself (gil.hpp); when it raises,
  // on_error(call, exception) -> (code, message) gives the answer.
  uint64_t ServeInline(const std::string& service, pybind11::function handler,
                       pybind11::function on_error);
  std::shared_ptr<NotifyQueue> Subscribe(const std::string& service, size_t max_pending,
                                         uint64_t* service_id);
  void Unserve(uint64_t service_id);
  std::shared_ptr<IncomingCall> NextCall();
  void Answer(IncomingCall& call, Status status, std::string reply);
  std::optional<Completion> NextCompletion();

  // ---- buffers, exports, transfers (core_bulk.cpp) ----
  std::unique_ptr<PyBuffer> Alloc(uint64_t size);
  void Export(const PyBuffer& buffer, const std::string& name, const ExportOptions& options);
  void Unexport(const std::string& name);
  RemoteBuffer Resolve(const std::string& name, const std::string& peer);
  void Release(const RemoteBuffer& remote);
  uint64_t ReadWrite(bool write, const RemoteBuffer& remote, uint64_t remote_offset,
                     const PyBuffer& local, uint64_t local_offset, uint64_t length,
                     std::optional<double> timeout);
  void ReadWriteAsync(bool write, const RemoteBuffer& remote, uint64_t remote_offset,
                      const PyBuffer& local, uint64_t local_offset, uint64_t length,
                      std::optional<double> timeout, uint64_t token);
  uint64_t ReadWriteBatch(bool write, const pybind11::sequence& pieces,
                          std::optional<double> timeout);

  // The client while open; throws StatusError UNAVAILABLE once closed.
  Client& Open() const;

 private:
  Core(std::unique_ptr<Client> client, int handler_threads);

  std::unique_ptr<Client> client_;  // never reset before ~Core
  SessionInfo info_;
  int handler_threads_;
  std::shared_ptr<CallQueue> calls_ = std::make_shared<CallQueue>();
  std::shared_ptr<CompletionQueue> completions_ = std::make_shared<CompletionQueue>();
  // Async starters hold it shared from submit to Then(); Close() exclusive
  // around the library's shutdown, so no async start straddles it (its
  // completion might otherwise never be delivered).
  std::shared_mutex submit_mu_;
  mutable std::mutex mu_;
  bool closed_ = false;                                    // GUARDED_BY(mu_)
  std::map<uint64_t, std::shared_ptr<NotifyQueue>> subs_;  // GUARDED_BY(mu_)
};

}  // namespace mcdma::python
