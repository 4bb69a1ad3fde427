// mcdma-cuda-check: a CUDA kernel writes mcdma buffers in place (mapped host
// memory, mcdma/cuda.hpp), the daemons move them to another host as a KV
// hand-off (mcdma/kv.hpp), and a kernel there checks every byte where they
// landed, as does the CPU.
//
//   mcdma-cuda-check probe
//       prints the CUDA devices; exit 77 (with the reason) when there are none
//   mcdma-cuda-check produce --socket S --id ID --layers N --layer-bytes B --allow HOST
//       allocates N buffers, registers each with CUDA (mapped), fills them
//       with a kernel through their device pointers, offers them as hand-off
//       ID and publishes them one by one; waits until one consumer has all
//   mcdma-cuda-check consume --socket S --peer HOST --id ID
//       pulls hand-off ID from HOST, registers each landed buffer with CUDA
//       and counts differing words with a kernel, then on the CPU
//
// The pattern is mcdma-kv-handoff's (layer L, word i = i * 0x9E3779B97F4A7C15
// + L), so either end may also be mcdma-kv-handoff. gpu/run-gpu-check.sh
// runs the two ends on two hosts. Exit codes: 0 every byte verified, 1
// failure, 2 usage, 77 no CUDA device (nothing was tried).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "mcdma/client.hpp"
#include "mcdma/cuda.hpp"
#include "mcdma/kv.hpp"
#include "pattern_kernels.hpp"

namespace {

using std::chrono::milliseconds;
namespace cuda = mcdma::cuda;

constexpr int kNoDevice = 77;
constexpr const char* kPatternName = "mcdma-kv-handoff/1";

struct Options {
  std::string socket;
  std::string id;
  std::string peer;
  std::vector<std::string> allow;
  uint32_t layers = 4;
  uint64_t layer_bytes = 8 << 20;
  int timeout_ms = 60000;
  int device = 0;
};

int Fail(const char* what, const mcdma::Status& st) {
  std::fprintf(stderr, "mcdma-cuda-check: %s: %s\n", what, st.ToString().c_str());
  return 1;
}

int FailCuda(const char* what, cudaError_t e) {
  std::fprintf(stderr, "mcdma-cuda-check: %s: %s: %s\n", what, cudaGetErrorName(e),
               cudaGetErrorString(e));
  return 1;
}

// 0 with a device to use, else the exit code (77: none, said why).
int CheckDevice(int device) {
  auto n = cuda::DeviceCount();
  if (!n.ok()) {
    std::printf("SKIP: no CUDA device: %s\n", n.status().message().c_str());
    return kNoDevice;
  }
  if (device < 0 || device >= *n) {
    std::fprintf(stderr, "mcdma-cuda-check: --device %d: there are %d devices\n", device, *n);
    return 2;
  }
  auto name = cuda::DeviceName(device);
  if (!name.ok()) return Fail("device", name.status());
  std::printf("CUDA device %d: %s\n", device, name->c_str());
  return 0;
}

int Probe() {
  auto n = cuda::DeviceCount();
  if (!n.ok()) {
    std::printf("SKIP: no CUDA device: %s\n", n.status().message().c_str());
    return kNoDevice;
  }
  for (int d = 0; d < *n; ++d) {
    auto name = cuda::DeviceName(d);
    if (!name.ok()) return Fail("device", name.status());
    std::printf("CUDA device %d: %s\n", d, name->c_str());
  }
  return 0;
}

int Produce(mcdma::Client& client, const Options& o) {
  if (int rc = CheckDevice(o.device); rc != 0) return rc;
  std::vector<mcdma::Buffer> layers;
  for (uint32_t i = 0; i < o.layers; ++i) {
    auto b = client.Alloc(o.layer_bytes);
    if (!b.ok()) return Fail("alloc", b.status());
    auto mapped = cuda::MappedBuffer::Register(*b, o.device);
    if (!mapped.ok()) return Fail("register", mapped.status());
    // The kernel writes the buffer itself, through its device address.
    if (cudaError_t e = cuda::FillPattern(mapped->device_ptr(), b->size() / 8, i);
        e != cudaSuccess) {
      return FailCuda("fill kernel", e);
    }
    std::printf("layer %u: %llu bytes written by a kernel at device address %p (host %p)\n", i,
                static_cast<unsigned long long>(b->size()), mapped->device_ptr(),
                static_cast<void*>(b->data()));
    layers.push_back(*b);
  }
  mcdma::kv::ExportOptions eo;
  eo.allowed_peers = o.allow;
  std::string manifest = std::string(R"({"dtype":"uint64","pattern":")") + kPatternName + R"("})";
  auto exp = mcdma::kv::Export::Create(client, o.id, layers, manifest, eo);
  if (!exp.ok()) return Fail("export", exp.status());
  std::printf("READY %s: %u layers\n", o.id.c_str(), o.layers);
  std::fflush(stdout);
  for (uint32_t i = 0; i < o.layers; ++i) {
    if (auto st = (*exp)->PublishLayer(i); !st.ok()) return Fail("publish", st);
    std::printf("published %u\n", i);
    std::fflush(stdout);
  }
  auto done = (*exp)->WaitConsumed(1, milliseconds(o.timeout_ms));
  if (!done.ok()) return Fail("wait_consumed", done.status());
  std::printf("CONSUMED by %s\n", done->front().c_str());
  (*exp)->Close();
  return 0;
}

int Consume(mcdma::Client& client, const Options& o) {
  if (int rc = CheckDevice(o.device); rc != 0) return rc;
  mcdma::kv::BufferPool pool(client);
  mcdma::kv::ImportOptions io;
  io.expect_json = std::string(R"({"dtype":"uint64","pattern":")") + kPatternName + R"("})";
  io.deadline = milliseconds(o.timeout_ms);
  io.open_wait = milliseconds(o.timeout_ms);
  io.pool = &pool;
  auto imp = mcdma::kv::Import::Open(client, o.peer, o.id, io);
  if (!imp.ok()) return Fail("open", imp.status());
  std::printf("opened %s from %s\n", o.id.c_str(), o.peer.c_str());
  auto st = (*imp)->Pull([](uint32_t layer) { std::printf("landed %u\n", layer); });
  if (!st.ok()) return Fail("pull", st);
  uint64_t total = 0;
  for (uint32_t i = 0; i < (*imp)->buffers().size(); ++i) {
    const mcdma::Buffer& b = (*imp)->buffers()[i];
    const uint64_t n = (*imp)->layer_nbytes()[i];
    auto mapped = cuda::MappedBuffer::Register(b, o.device);
    if (!mapped.ok()) return Fail("register", mapped.status());
    uint64_t gpu_bad = 0;
    if (cudaError_t e = cuda::CountMismatches(mapped->device_ptr(), n / 8, i, &gpu_bad);
        e != cudaSuccess) {
      return FailCuda("check kernel", e);
    }
    uint64_t cpu_bad = 0;
    const auto* words = reinterpret_cast<const uint64_t*>(b.data());
    for (uint64_t w = 0; w < n / 8; ++w) cpu_bad += words[w] != w * cuda::kGolden + i ? 1 : 0;
    std::printf("layer %u: %llu bytes, %llu words differ on the GPU, %llu on the CPU\n", i,
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(gpu_bad),
                static_cast<unsigned long long>(cpu_bad));
    if (gpu_bad != 0 || cpu_bad != 0) return 1;
    total += n;
  }
  std::printf("VERIFIED %llu bytes in %zu layers on the GPU and the CPU\n",
              static_cast<unsigned long long>(total), (*imp)->buffers().size());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"A CUDA kernel writes mcdma buffers; the daemons move them; a kernel checks them."};
  app.require_subcommand(1);
  Options o;
  auto* probe = app.add_subcommand("probe", "list the CUDA devices (exit 77: none)");
  auto* produce = app.add_subcommand("produce", "fill buffers with a kernel and offer them");
  auto* consume = app.add_subcommand("consume", "pull a hand-off and check it with a kernel");
  for (auto* sub : {produce, consume}) {
    sub->add_option("--socket", o.socket, "the daemon's control socket");
    sub->add_option("--id", o.id, "the hand-off id")->required();
    sub->add_option("--timeout-ms", o.timeout_ms, "deadline of every wait")
        ->check(CLI::Range(1, 3600000));
    sub->add_option("--device", o.device, "CUDA device")->check(CLI::Range(0, 1023));
  }
  produce->add_option("--layers", o.layers, "layers")->check(CLI::Range(1u, mcdma::kv::kMaxLayers));
  produce->add_option("--layer-bytes", o.layer_bytes, "bytes per layer")
      ->check(CLI::Range(uint64_t{8}, uint64_t{1} << 34));
  produce->add_option("--allow", o.allow, "hosts whose apps may pull it");
  consume->add_option("--peer", o.peer, "the producer's host (empty: this host)");
  CLI11_PARSE(app, argc, argv);
  if (probe->parsed()) return Probe();

  mcdma::ClientOptions co;
  co.socket = o.socket;
  co.app_name = "mcdma-cuda-check";
  auto client = mcdma::Client::Connect(co);
  if (!client.ok()) return Fail("connect", client.status());
  return produce->parsed() ? Produce(**client, o) : Consume(**client, o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcdma-cuda-check: %s\n", e.what());
    return 1;
  }
}
