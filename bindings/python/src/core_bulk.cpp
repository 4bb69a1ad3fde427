// _Core: buffers, exports, remote handles and one-sided transfers.
#include <string>
#include <utility>
#include <vector>

#include "core.hpp"
#include "errors.hpp"
#include "gil.hpp"

namespace py = pybind11;

namespace mcdma::python {

std::unique_ptr<PyBuffer> Core::Alloc(uint64_t size) {
  Client& c = Open();
  return std::make_unique<PyBuffer>(Check(WithoutGil([&] { return c.Alloc(size); })));
}

void Core::Export(const PyBuffer& buffer, const std::string& name, const ExportOptions& options) {
  Client& c = Open();
  Check(WithoutGil([&] { return c.Export(buffer.get(), name, options); }));
}

void Core::Unexport(const std::string& name) {
  Client& c = Open();
  Check(WithoutGil([&] { return c.Unexport(name); }));
}

RemoteBuffer Core::Resolve(const std::string& name, const std::string& peer) {
  Client& c = Open();
  return Check(WithoutGil([&] { return c.Resolve(name, peer); }));
}

void Core::Release(const RemoteBuffer& remote) {
  Client& c = Open();
  Check(WithoutGil([&] { return c.Release(remote); }));
}

uint64_t Core::ReadWrite(bool write, const RemoteBuffer& remote, uint64_t remote_offset,
                         const PyBuffer& local, uint64_t local_offset, uint64_t length,
                         std::optional<double> timeout) {
  Client& c = Open();
  auto ms = SecondsToMs(timeout);
  // `local` stays alive: the caller's Python object is referenced by the
  // call's arguments until this returns.
  return Check(WithoutGil([&] {
    return write ? c.Write(remote, remote_offset, local.get(), local_offset, length, ms)
                 : c.Read(remote, remote_offset, local.get(), local_offset, length, ms);
  }));
}

void Core::ReadWriteAsync(bool write, const RemoteBuffer& remote, uint64_t remote_offset,
                          const PyBuffer& local, uint64_t local_offset, uint64_t length,
                          std::optional<double> timeout, uint64_t token) {
  Client& c = Open();
  auto ms = SecondsToMs(timeout);
  auto completions = completions_;
  Buffer keep = local.get();
  bool started = WithoutGil([&] {
    std::shared_lock lock(submit_mu_);
    if (!completions->Expect()) return false;
    Future<uint64_t> f = write ? c.WriteAsync(remote, remote_offset, keep, local_offset, length, ms)
                               : c.ReadAsync(remote, remote_offset, keep, local_offset, length, ms);
    // Keeps the local buffer mapped until the transfer is over, even if
    // Python drops every reference meanwhile.
    f.Then([completions, token, keep = std::move(keep)](Result<uint64_t> r) mutable {
      Completion done;
      done.token = token;
      if (r.ok()) {
        done.bytes = *r;
      } else {
        done.status = r.status();
      }
      done.keep_alive = std::move(keep);
      completions->Push(std::move(done));
    });
    return true;
  });
  if (!started) throw StatusError(Status(Code::kUnavailable, "the client is closed"));
}

uint64_t Core::ReadWriteBatch(bool write, const py::sequence& pieces,
                              std::optional<double> timeout) {
  Client& c = Open();
  auto ms = SecondsToMs(timeout);
  const size_t n = py::len(pieces);
  // Copies, so the batch holds what it points at without the GIL.
  std::vector<Buffer> locals;
  std::vector<RemoteBuffer> remotes;
  std::vector<Transfer> transfers(n);
  locals.reserve(n);
  remotes.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    py::handle item = pieces[i];
    if (!py::isinstance<py::sequence>(item) || py::len(item) != 5) {
      throw py::type_error("batch piece " + std::to_string(i) +
                           ": expected (buffer, local_offset, remote, remote_offset, length)");
    }
    auto piece = py::reinterpret_borrow<py::sequence>(item);
    locals.push_back(piece[0].cast<const PyBuffer&>().get());
    remotes.push_back(piece[2].cast<RemoteBuffer>());
    transfers[i].local_offset = piece[1].cast<uint64_t>();
    transfers[i].remote_offset = piece[3].cast<uint64_t>();
    transfers[i].length = piece[4].cast<uint64_t>();
  }
  for (size_t i = 0; i < n; ++i) {
    transfers[i].local = &locals[i];
    transfers[i].remote = &remotes[i];
  }
  return Check(
      WithoutGil([&] { return write ? c.WriteBatch(transfers, ms) : c.ReadBatch(transfers, ms); }));
}

}  // namespace mcdma::python
