// The public C++ API: thin wrappers over ClientCore.
#include "mcdma/client.hpp"

#include "client_core.hpp"

namespace mcdma {

using internal::ClientCore;
using internal::OpState;
using internal::Submission;

// ---- Message ----
Message::Message(Message&& o) noexcept
    : core_(std::move(o.core_)), data_(o.data_), size_(o.size_), arena_off_(o.arena_off_) {
  o.data_ = nullptr;
  o.size_ = 0;
}
Message& Message::operator=(Message&& o) noexcept {
  if (this != &o) {
    if (core_) core_->ReleaseMessage(*this);
    core_ = std::move(o.core_);
    data_ = o.data_;
    size_ = o.size_;
    arena_off_ = o.arena_off_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}
Message::~Message() {
  if (core_) core_->ReleaseMessage(*this);
}

// ---- Buffer ----
std::byte* Buffer::data() const { return state_ ? state_->segment.data() : nullptr; }
uint64_t Buffer::size() const { return state_ ? state_->segment.size() : 0; }
uint64_t Buffer::id() const { return state_ ? state_->id : 0; }

// ---- ServerCall ----
Status ServerCall::Reply(std::span<const std::byte> reply) {
  if (one_way_) return Status(Code::kInvalid, "a notification has nobody to reply to");
  if (replied_) return Status(Code::kInvalid, "already replied");
  replied_ = true;
  return core_->SendReply(call_id_, reply, Code::kOk);
}

Status ServerCall::ReplyError(const Status& error) {
  if (one_way_) return Status(Code::kInvalid, "a notification has nobody to reply to");
  if (replied_) return Status(Code::kInvalid, "already replied");
  replied_ = true;
  Code code = error.ok() ? Code::kInternal : error.code();
  const std::string& m = error.message();
  return core_->SendReply(
      call_id_, std::span<const std::byte>(reinterpret_cast<const std::byte*>(m.data()), m.size()),
      code);
}

// ---- Future ----
namespace {
Status OpStatus(const OpState& op) {
  if (op.code == Code::kOk) return Status::Ok();
  return Status(op.code, op.reason, op.message);
}

template <typename T>
Result<T> Take(OpState& op);

template <>
Result<Message> Take<Message>(OpState& op) {
  if (op.code != Code::kOk) return OpStatus(op);
  auto core = op.core.lock();
  if (!core || !op.has_payload) return Message();
  Message m = core->MakeMessage(op);
  op.has_payload = false;  // the Message owns the range now
  return m;
}

template <>
Result<uint64_t> Take<uint64_t>(OpState& op) {
  if (op.code != Code::kOk) return OpStatus(op);
  return op.bytes;
}
}  // namespace

template <typename T>
bool Future<T>::Ready() const {
  return op_ && op_->done.load(std::memory_order_acquire) != 0;
}

template <typename T>
Result<T> Future<T>::Wait() {
  if (!op_) return Status(Code::kInvalid, "empty future");
  auto core = op_->core.lock();
  if (core)
    MCDMA_RETURN_IF_ERROR(core->Wait(*op_));
  else if (op_->done.load() == 0)
    return Status(Code::kCancelled, "the client was closed");
  return Take<T>(*op_);
}

template <typename T>
void Future<T>::Then(std::function<void(Result<T>)> fn) {
  if (!op_) {
    fn(Status(Code::kInvalid, "empty future"));
    return;
  }
  auto core = op_->core.lock();
  auto cb = [fn = std::move(fn)](OpState& op) { fn(Take<T>(op)); };
  if (core) {
    core->OnComplete(op_, std::move(cb));
  } else {
    cb(*op_);
  }
}

template class Future<Message>;
template class Future<uint64_t>;

// ---- Client ----
Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  MCDMA_ASSIGN_OR_RETURN(auto core, ClientCore::Connect(options));
  return std::unique_ptr<Client>(new Client(std::move(core)));
}

Client::Client(std::shared_ptr<ClientCore> core) : core_(std::move(core)) {}
Client::~Client() { core_->Shutdown(); }

void Client::Close() { core_->Shutdown(); }

SessionInfo Client::info() const { return core_->info(); }

Result<uint64_t> Client::Serve(std::string_view service, Handler handler) {
  return core_->AddHandler(service, std::move(handler));
}

Status Client::Unserve(uint64_t service_id) { return core_->RemoveHandler(service_id); }

namespace {
Future<Message> StartCall(ClientCore& core, uint64_t service_id, std::span<const std::byte> request,
                          std::chrono::milliseconds timeout, shm::Op op_code, Status* error) {
  Submission sub;
  sub.desc.opcode = static_cast<uint8_t>(op_code);
  sub.desc.target = service_id;
  sub.payload = request;
  sub.op = std::make_shared<OpState>();
  sub.op->service_id = service_id;
  *error = core.Submit(std::span<Submission>(&sub, 1), timeout);
  return ClientCore::MakeFuture<Message>(sub.op);
}

bool StaleService(const Status& s) { return s.reason() == Reason::kNoSuchService; }
}  // namespace

Result<Message> Client::Call(std::string_view service, std::span<const std::byte> request,
                             std::chrono::milliseconds timeout) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    MCDMA_ASSIGN_OR_RETURN(uint64_t id, core_->ServiceId(service, attempt > 0));
    Status st;
    Future<Message> f = StartCall(*core_, id, request, timeout, shm::Op::kCall, &st);
    if (!st.ok()) return st;
    Result<Message> r = f.Wait();
    // A cached id goes stale when its server restarts: look it up again once.
    if (!r.ok() && attempt == 0 && StaleService(r.status())) continue;
    return r;
  }
  return Status(Code::kInternal, "unreachable");
}

Result<Message> Client::Call(std::string_view service, std::string_view request,
                             std::chrono::milliseconds timeout) {
  return Call(service,
              std::span<const std::byte>(reinterpret_cast<const std::byte*>(request.data()),
                                         request.size()),
              timeout);
}

Future<Message> Client::CallAsync(std::string_view service, std::span<const std::byte> request,
                                  std::chrono::milliseconds timeout) {
  auto failed = [](const Status& st) {
    auto op = std::make_shared<OpState>();
    op->code = st.code();
    op->reason = st.reason();
    op->message = st.message();
    op->done.store(1);
    return ClientCore::MakeFuture<Message>(op);
  };
  auto id = core_->ServiceId(service, false);
  if (!id.ok()) return failed(id.status());
  Status st;
  Future<Message> f = StartCall(*core_, *id, request, timeout, shm::Op::kCall, &st);
  if (!st.ok()) return failed(st);
  return f;
}

Status Client::Notify(std::string_view service, std::span<const std::byte> message,
                      std::chrono::milliseconds timeout) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    MCDMA_ASSIGN_OR_RETURN(uint64_t id, core_->ServiceId(service, attempt > 0));
    Status st;
    Future<Message> f = StartCall(*core_, id, message, timeout, shm::Op::kNotify, &st);
    if (!st.ok()) return st;
    Result<Message> r = f.Wait();
    if (!r.ok() && attempt == 0 && StaleService(r.status())) continue;
    return r.status();
  }
  return Status(Code::kInternal, "unreachable");
}

Result<Buffer> Client::Alloc(uint64_t size) { return core_->Alloc(size); }
Status Client::Export(const Buffer& buffer, std::string_view name, const ExportOptions& options) {
  return core_->Export(buffer, name, options);
}
Status Client::Unexport(std::string_view name) { return core_->Unexport(name); }
Result<RemoteBuffer> Client::Resolve(std::string_view name, std::string_view peer) {
  return core_->Resolve(name, peer);
}
Status Client::Release(const RemoteBuffer& remote) { return core_->Release(remote); }

namespace {
Submission TransferSubmission(shm::Op op, const RemoteBuffer& remote, uint64_t remote_offset,
                              const Buffer& local, uint64_t local_offset, uint64_t length) {
  Submission sub;
  sub.desc.opcode = static_cast<uint8_t>(op);
  sub.desc.target = remote.handle;
  sub.desc.local_buffer = ClientCore::BufferId(local);
  sub.desc.local_offset = local_offset;
  sub.desc.remote_offset = remote_offset;
  sub.desc.length = length;
  sub.op = std::make_shared<OpState>();
  return sub;
}

Future<uint64_t> StartTransfer(ClientCore& core, shm::Op op, const RemoteBuffer& remote,
                               uint64_t remote_offset, const Buffer& local, uint64_t local_offset,
                               uint64_t length, std::chrono::milliseconds timeout) {
  Submission sub = TransferSubmission(op, remote, remote_offset, local, local_offset, length);
  Status st = core.Submit(std::span<Submission>(&sub, 1), timeout);
  if (!st.ok()) {
    sub.op->code = st.code();
    sub.op->reason = st.reason();
    sub.op->message = st.message();
    sub.op->done.store(1);
  }
  return ClientCore::MakeFuture<uint64_t>(sub.op);
}

Result<uint64_t> RunBatch(ClientCore& core, shm::Op op, std::span<const Transfer> pieces,
                          std::chrono::milliseconds timeout) {
  if (pieces.empty()) return uint64_t{0};
  std::vector<Submission> subs;
  subs.reserve(pieces.size());
  for (const Transfer& t : pieces) {
    if (t.local == nullptr || t.remote == nullptr)
      return Status(Code::kInvalid, "batch piece without buffer");
    subs.push_back(
        TransferSubmission(op, *t.remote, t.remote_offset, *t.local, t.local_offset, t.length));
  }
  MCDMA_RETURN_IF_ERROR(core.Submit(subs, timeout));
  uint64_t total = 0;
  Status first;
  for (auto& sub : subs) {
    MCDMA_RETURN_IF_ERROR(core.Wait(*sub.op));
    if (sub.op->code != Code::kOk && first.ok())
      first = Status(sub.op->code, sub.op->reason, sub.op->message);
    total += sub.op->bytes;
  }
  if (!first.ok()) return first;
  return total;
}
}  // namespace

Result<uint64_t> Client::Write(const RemoteBuffer& remote, uint64_t remote_offset,
                               const Buffer& local, uint64_t local_offset, uint64_t length,
                               std::chrono::milliseconds timeout) {
  return WriteAsync(remote, remote_offset, local, local_offset, length, timeout).Wait();
}
Result<uint64_t> Client::Read(const RemoteBuffer& remote, uint64_t remote_offset,
                              const Buffer& local, uint64_t local_offset, uint64_t length,
                              std::chrono::milliseconds timeout) {
  return ReadAsync(remote, remote_offset, local, local_offset, length, timeout).Wait();
}
Future<uint64_t> Client::WriteAsync(const RemoteBuffer& remote, uint64_t remote_offset,
                                    const Buffer& local, uint64_t local_offset, uint64_t length,
                                    std::chrono::milliseconds timeout) {
  return StartTransfer(*core_, shm::Op::kWrite, remote, remote_offset, local, local_offset, length,
                       timeout);
}
Future<uint64_t> Client::ReadAsync(const RemoteBuffer& remote, uint64_t remote_offset,
                                   const Buffer& local, uint64_t local_offset, uint64_t length,
                                   std::chrono::milliseconds timeout) {
  return StartTransfer(*core_, shm::Op::kRead, remote, remote_offset, local, local_offset, length,
                       timeout);
}
Result<uint64_t> Client::WriteBatch(std::span<const Transfer> pieces,
                                    std::chrono::milliseconds timeout) {
  return RunBatch(*core_, shm::Op::kWrite, pieces, timeout);
}
Result<uint64_t> Client::ReadBatch(std::span<const Transfer> pieces,
                                   std::chrono::milliseconds timeout) {
  return RunBatch(*core_, shm::Op::kRead, pieces, timeout);
}

}  // namespace mcdma
