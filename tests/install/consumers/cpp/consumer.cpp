// A C++ program outside the mcdma tree, as an engine would be: it sees only
// the installed <mcdma/client.hpp> and links the installed libmcdma.
// Against a real daemon (MCDMA_SOCKET): a served call and a named error,
// an async call, an exported buffer read and written (every byte checked),
// and Result's error path. Prints "consumer-cpp: ok" and exits 0 only if
// every step held.
#include <mcdma/mcdma.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mcdma/client.hpp>
#include <string>

namespace {

int Fail(const std::string& what, const mcdma::Status& st) {
  std::fprintf(stderr, "consumer-cpp: FAIL %s: %s\n", what.c_str(), st.ToString().c_str());
  return 1;
}

std::byte Pattern(uint64_t i, unsigned seed) { return static_cast<std::byte>(i * 31 + seed); }

}  // namespace

int main() {
  constexpr uint64_t kSize = 1 << 20;
  mcdma::ClientOptions options;
  options.app_name = "consumer-cpp-server";
  auto server = mcdma::Client::Connect(options);
  if (!server.ok()) return Fail("connect", server.status());
  options.app_name = "consumer-cpp-client";
  auto client = mcdma::Client::Connect(options);
  if (!client.ok()) return Fail("connect", client.status());

  auto served = (*server)->Serve("consumer.reverse", [](mcdma::ServerCall& call) {
    std::string s(call.view());
    std::reverse(s.begin(), s.end());
    (void)call.Reply(s);
  });
  if (!served.ok()) return Fail("serve", served.status());
  auto reply = (*client)->Call("consumer.reverse", std::string_view("abcdef"));
  if (!reply.ok()) return Fail("call", reply.status());
  if (reply->view() != "fedcba") return Fail("reply bytes", mcdma::Status::Ok());
  auto missing = (*client)->Call("consumer.nobody", std::string_view("x"));
  if (missing.ok() || missing.status().code() != mcdma::Code::kNotFound ||
      std::string(mcdma::CodeName(missing.status().code())) != "NOT_FOUND")
    return Fail("an unknown service is NOT_FOUND", missing.status());
  const char* ping = "async";
  auto future = (*client)->CallAsync("consumer.reverse",
                                     std::span(reinterpret_cast<const std::byte*>(ping), 5));
  auto async_reply = future.Wait();
  if (!async_reply.ok() || async_reply->view() != "cnysa")
    return Fail("async call", async_reply.status());

  auto exported = (*server)->Alloc(kSize);
  auto local = (*client)->Alloc(kSize);
  if (!exported.ok() || !local.ok()) return Fail("alloc", exported.status());
  for (uint64_t i = 0; i < kSize; ++i) exported->data()[i] = Pattern(i, 1);
  mcdma::ExportOptions writable;
  writable.allow_write = true;
  if (auto st = (*server)->Export(*exported, "consumer.buf", writable); !st.ok())
    return Fail("export", st);
  auto remote = (*client)->Resolve("consumer.buf");
  if (!remote.ok()) return Fail("resolve", remote.status());
  auto read = (*client)->Read(*remote, 0, *local, 0, kSize);
  if (!read.ok() || *read != kSize) return Fail("read", read.status());
  for (uint64_t i = 0; i < kSize; ++i)
    if (local->data()[i] != Pattern(i, 1)) return Fail("read bytes", mcdma::Status::Ok());
  for (uint64_t i = 0; i < kSize; ++i) local->data()[i] = Pattern(i, 2);
  auto wrote = (*client)->WriteAsync(*remote, 0, *local, 0, kSize).Wait();
  if (!wrote.ok() || *wrote != kSize) return Fail("write", wrote.status());
  for (uint64_t i = 0; i < kSize; ++i)
    if (exported->data()[i] != Pattern(i, 2)) return Fail("written bytes", mcdma::Status::Ok());
  auto out_of_range = (*client)->Read(*remote, 1, *local, 0, kSize);
  if (out_of_range.ok() || out_of_range.status().code() != mcdma::Code::kOutOfRange)
    return Fail("a read past the end is OUT_OF_RANGE", out_of_range.status());

  (void)(*client)->Release(*remote);
  (*client)->Close();
  (*server)->Close();
  std::printf("consumer-cpp: ok (libmcdma %s; calls and %llu bytes each way)\n",
              MCDMA_VERSION_STRING, static_cast<unsigned long long>(kSize));
  return 0;
}
