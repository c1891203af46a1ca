// A TCP proxy on 127.0.0.1 in front of a test server that delays every chunk the client sends by a
// settable time: each round trip of a client through it costs at least that delay, as with a
// stalled or far-away server. Stopped on destruction. Delay() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace pglock::testing {

class DelayProxy {
 public:
  // Forwards to 127.0.0.1:`target_port`; started() is false when it could not listen.
  explicit DelayProxy(int target_port);
  ~DelayProxy();
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  bool started() const { return listener_ >= 0; }
  int port() const { return port_; }
  void Delay(std::chrono::milliseconds d) { delay_ms_.store(d.count()); }

 private:
  void Accept();
  void Pump(int from, int to, bool delayed);

  const int target_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;  // guards sockets_ and pumps_
  std::vector<int> sockets_;
  std::vector<std::thread> pumps_;
};

}  // namespace pglock::testing
