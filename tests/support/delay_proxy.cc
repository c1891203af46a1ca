#include "tests/support/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace pglock::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

DelayProxy::DelayProxy(int target_port) : target_port_(target_port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return;
  }
  listener_ = fd;
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

DelayProxy::~DelayProxy() {
  stop_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int s : sockets_) shutdown(s, SHUT_RDWR);
  }
  for (std::thread& t : pumps_) t.join();
  for (int s : sockets_) close(s);
  if (listener_ >= 0) close(listener_);
}

void DelayProxy::Accept() {
  while (!stop_.load()) {
    pollfd p{listener_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in a = Loopback(target_port_);
    if (server < 0 || connect(server, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
      close(client);
      if (server >= 0) close(server);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    sockets_.push_back(client);
    sockets_.push_back(server);
    pumps_.emplace_back([this, client, server] { Pump(client, server, true); });
    pumps_.emplace_back([this, client, server] { Pump(server, client, false); });
  }
}

void DelayProxy::Pump(int from, int to, bool delayed) {
  char buf[65536];
  while (!stop_.load()) {
    pollfd p{from, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = read(from, buf, sizeof(buf));
    if (n <= 0) break;
    if (delayed) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t w = send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
      if (w <= 0) return;
      sent += w;
    }
  }
  shutdown(to, SHUT_WR);
}

}  // namespace pglock::testing
