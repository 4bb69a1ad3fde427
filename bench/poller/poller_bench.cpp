// mcdma_bench_poller: the event loop the tcp transport waits in
// (platform::Poller: epoll on Linux, kqueue on macOS) against Boost.Asio's
// io_context, the alternative that has both, and against plain blocking
// sockets (the kernel's own wake-up, no event loop), on the same TCP
// ping-pong in the same run. Two threads, one per end, each with its own
// loop; every end waits the way the transport's I/O thread does: it polls
// (yielding the CPU) for 50 us after activity, then blocks. Every reply is
// checked byte for byte.
//
// The figures decide the transport's event loop (docs/architecture.md,
// "The platform seam"): the ratio asio/poller is what matters, absolute
// times on a shared 2-CPU machine are noise.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "driver/tcp/tcp_socket.hpp"
#include "harness/endpoint.hpp"
#include "harness/latency.hpp"
#include "platform/poller.hpp"
#include "platform/socket.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using mcdma::platform::Fd;
constexpr auto kSpin = std::chrono::microseconds(50);

struct Pair {
  Fd client, server;
};

// A connected loopback TCP pair, non-blocking, TCP_NODELAY on both ends.
Pair Connect() {
  auto listener = mcdma::driver::tcp::Listen("127.0.0.1", 0);
  if (!listener.ok()) throw std::runtime_error(listener.status().ToString());
  auto port = mcdma::driver::tcp::BoundPort(listener->get());
  auto client =
      mcdma::driver::tcp::Dial("127.0.0.1", *port, Clock::now() + std::chrono::seconds(5));
  if (!client.ok()) throw std::runtime_error(client.status().ToString());
  int fd = -1;
  for (int i = 0; i < 5000 && fd < 0; ++i) {
    fd = accept(listener->get(), nullptr, nullptr);
    if (fd < 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (fd < 0) throw std::runtime_error("accept failed");
  Fd server(fd);
  (void)mcdma::driver::tcp::SetDataSocketOptions(server.get());
  return {std::move(*client), std::move(server)};
}

void SetBlocking(int fd, bool blocking) {
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, blocking ? (fl & ~O_NONBLOCK) : (fl | O_NONBLOCK));
}

// One end's loop: `initiator` sends first and times each round trip.
using End = std::function<void(int fd, size_t bytes, int rounds, bool initiator,
                               std::vector<double>* samples)>;

void Check(const std::vector<char>& got, const std::vector<char>& want) {
  if (got != want) throw std::runtime_error("reply bytes differ from the request");
}

std::vector<char> Pattern(size_t bytes) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>('a' + i % 23);
  return v;
}

// platform::Poller, spin-then-block like driver/tcp/tcp_io.cpp.
void PollerEnd(int fd, size_t bytes, int rounds, bool initiator, std::vector<double>* samples) {
  auto poller = mcdma::platform::Poller::Create();
  if (!poller.ok()) throw std::runtime_error(poller.status().ToString());
  int tag = 0;
  (void)poller->Add(fd, &tag, mcdma::platform::kInterestRead);
  std::vector<char> msg = Pattern(bytes), in(bytes);
  std::array<mcdma::platform::PollEvent, 4> events{};
  auto last = Clock::now();
  auto send_all = [&](const std::vector<char>& b) {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = mcdma::platform::SendNoSignal(fd, b.data() + done, b.size() - done, 0);
      if (n > 0) done += static_cast<size_t>(n);
    }
  };
  // As the I/O thread does: ask the poller (without blocking while the
  // spin budget lasts), read only what it reports readable.
  auto recv_all = [&] {
    size_t got = 0;
    while (got < bytes) {
      bool spinning = Clock::now() - last < kSpin;
      auto r = poller->Wait(events, spinning ? 0 : -1);
      if (!r.ok()) throw std::runtime_error(r.status().ToString());
      if (*r == 0) {
        if (spinning) std::this_thread::yield();
        continue;
      }
      for (;;) {
        ssize_t n = recv(fd, in.data() + got, bytes - got, 0);
        if (n == 0) throw std::runtime_error("peer closed");
        if (n < 0) break;  // drained (EAGAIN): back to the poller
        got += static_cast<size_t>(n);
        last = Clock::now();
        if (got == bytes) break;
      }
    }
  };
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    if (initiator) send_all(msg);
    recv_all();
    if (initiator) {
      samples->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      Check(in, msg);
    } else {
      send_all(in);
    }
  }
}

// Boost.Asio: async_read/async_write on an io_context, driven with poll()
// while spinning and run_one() once the budget is spent.
void AsioEnd(int fd, size_t bytes, int rounds, bool initiator, std::vector<double>* samples) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket sock(io);
  sock.assign(boost::asio::ip::tcp::v4(), dup(fd));
  std::vector<char> msg = Pattern(bytes), in(bytes);
  auto last = Clock::now();
  auto drive = [&](bool& done) {
    while (!done) {
      if (io.poll() > 0) {
        last = Clock::now();
        continue;
      }
      if (done) break;
      if (Clock::now() - last < kSpin) {
        std::this_thread::yield();
      } else {
        io.restart();
        io.run_one();
        last = Clock::now();
      }
      io.restart();
    }
  };
  auto write = [&](const std::vector<char>& b) {
    bool done = false;
    boost::asio::async_write(sock, boost::asio::buffer(b), [&](auto ec, size_t) {
      if (ec) throw std::runtime_error("asio write: " + ec.message());
      done = true;
    });
    drive(done);
  };
  auto read = [&] {
    bool done = false;
    boost::asio::async_read(sock, boost::asio::buffer(in), [&](auto ec, size_t) {
      if (ec) throw std::runtime_error("asio read: " + ec.message());
      done = true;
    });
    drive(done);
  };
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    if (initiator) write(msg);
    read();
    if (initiator) {
      samples->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      Check(in, msg);
    } else {
      write(in);
    }
  }
}

// Blocking sockets: the kernel wakes the reader; no loop, no spinning.
void BlockingEnd(int fd, size_t bytes, int rounds, bool initiator, std::vector<double>* samples) {
  SetBlocking(fd, true);
  std::vector<char> msg = Pattern(bytes), in(bytes);
  auto send_all = [&](const std::vector<char>& b) {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = mcdma::platform::SendNoSignal(fd, b.data() + done, b.size() - done, 0);
      if (n <= 0) throw std::runtime_error("send failed");
      done += static_cast<size_t>(n);
    }
  };
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    if (initiator) send_all(msg);
    if (recv(fd, in.data(), bytes, MSG_WAITALL) != static_cast<ssize_t>(bytes))
      throw std::runtime_error("recv failed");
    if (initiator) {
      samples->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      Check(in, msg);
    } else {
      send_all(in);
    }
  }
}

using mcdma::harness::Percentile;

struct Result {
  double p50 = 0, p99 = 0;
};

Result Run(const End& end, size_t bytes, int warmup, int rounds) {
  Pair pair = Connect();
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(warmup) + static_cast<size_t>(rounds));
  std::exception_ptr failure;
  std::thread server([&] {
    try {
      end(pair.server.get(), bytes, warmup + rounds, false, nullptr);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  end(pair.client.get(), bytes, warmup + rounds, true, &samples);
  server.join();
  if (failure) std::rethrow_exception(failure);
  samples.erase(samples.begin(), samples.begin() + warmup);
  return {Percentile(samples, 0.50), Percentile(samples, 0.99)};
}

int Main(int argc, char** argv) {
  CLI::App app(
      "mcdma_bench_poller: the tcp transport's event loop (platform::Poller) vs "
      "Boost.Asio vs blocking sockets, on one TCP ping-pong over loopback");
  int rounds = 20000;
  int warmup = 2000;
  int repeats = 3;
  std::vector<size_t> payloads{64, 4096};
  app.add_option("--iterations", rounds, "timed round trips per mechanism and payload")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed round trips before them")->capture_default_str();
  app.add_option("--repeats", repeats, "runs of each mechanism, interleaved; medians reported")
      ->capture_default_str();
  app.add_option("--payloads", payloads, "payload sizes in bytes")
      ->delimiter(',')
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  struct Mech {
    const char* key;
    const char* label;
    End end;
  };
  const std::vector<Mech> mechs = {
      {"poller", "platform::Poller (epoll), spin 50 us then block", PollerEnd},
      {"asio", "boost::asio::io_context, spin 50 us then block", AsioEnd},
      {"blocking", "blocking recv/send (no event loop)", BlockingEnd}};
  printf(
      "mcdma_bench_poller: TCP ping-pong over 127.0.0.1, two threads, %d round trips x %d "
      "repeats (medians of the repeats' p50/p99), %u CPUs\n",
      rounds, repeats, std::thread::hardware_concurrency());
  printf("%-8s %8s %10s %10s %12s\n", "row", "payload", "p50 us", "p99 us", "p50/poller");
  try {
    for (size_t bytes : payloads) {
      std::vector<std::vector<Result>> runs(mechs.size());
      for (int r = 0; r < repeats; ++r) {
        for (size_t m = 0; m < mechs.size(); ++m)
          runs[m].push_back(Run(mechs[m].end, bytes, warmup, rounds));
      }
      std::vector<Result> med(mechs.size());
      for (size_t m = 0; m < mechs.size(); ++m) {
        std::vector<double> p50, p99;
        for (auto& x : runs[m]) {
          p50.push_back(x.p50);
          p99.push_back(x.p99);
        }
        med[m] = {Percentile(p50, 0.5), Percentile(p99, 0.5)};
      }
      for (size_t m = 0; m < mechs.size(); ++m) {
        printf("%-8s %8zu %10.1f %10.1f %11.2fx\n", mechs[m].key, bytes, med[m].p50, med[m].p99,
               med[0].p50 > 0 ? med[m].p50 / med[0].p50 : 0.0);
      }
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "mcdma_bench_poller: %s\n", e.what());
    return 1;
  }
  for (const auto& m : mechs) printf("  %-8s %s\n", m.key, m.label);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mcdma::harness::GuardedMain("mcdma_bench_poller", Main, argc, argv);
}
