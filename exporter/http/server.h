// The HTTP side: prometheus-cpp's Exposer (CivetWeb) serving the SnapshotMetrics' families on the
// telemetry path, plus the landing page, the on-call view (/locks, /api/v1/locks,
// /api/v1/events), the runbooks (/runbooks/<name>), /-/healthy, /-/ready, basic auth and TLS.
// Scrapes only read snapshots; they never touch the database. One HttpServer per process
// (CivetWeb's begin_request callback has no user pointer through Exposer). Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/http/auth.h"
#include "exporter/http/exposition.h"
#include "exporter/http/metrics_cache.h"
#include "exporter/http/oncall.h"
#include "exporter/http/page_cache.h"
#include "exporter/snapshot/preflight.h"
#include "exporter/util/duration.h"
#include "exporter/util/status.h"
#include "exporter/util/thread_annotations.h"

namespace prometheus {
class Exposer;
}
struct mg_connection;

namespace pglock {

class HttpServer {
 public:
  // Binds and starts serving: the server in *started. Unavailable when the address cannot be
  // bound or the TLS shims cannot be loaded, IoFailed when the TLS files cannot be used.
  static Status Start(const WebConfig& web, const SnapshotMetrics::Source& source,
                      const ExporterInfo& build, std::unique_ptr<HttpServer>* started);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::vector<int> ListeningPorts() const;

 private:
  HttpServer(const WebConfig& web, SnapshotMetrics::Source source, ExporterInfo build);
  static int BeginRequest(mg_connection* conn);
  int Handle(mg_connection* conn);
  std::string LandingPage() const;
  // Answers the telemetry path from metrics_cache_: gzip when the request accepts it.
  void ServeMetrics(mg_connection* conn);
  // /locks, /api/v1/locks, /api/v1/events, /api/v1/timeline from page_cache_: the status sent
  // (400 for a bad ?since=), 0 for another path.
  int ServeOnCall(mg_connection* conn, const std::string& uri);
  // /api/v1/preflight (docs/api.md): hands the request to the target's poller and waits for its
  // next poll's answer (again each poll up to ?wait=, while not clear). The status sent.
  int ServePreflight(mg_connection* conn);
  // The answer of `snap`'s poller for `request`, asked again at each poll while not clear, up to
  // `wait`. 200 and *answer, else the status to send and *error. Blocks for a poll or more.
  int AskPreflight(const TargetSnapshot& snap, const PreflightRequest& request, Duration wait,
                   std::optional<PreflightAnswer>* answer, std::string* error);
  // /locks?lock=schema.table of one target: the preflight section for that table, "" otherwise
  // (not a schema.table, no such table, several targets).
  std::string PagePreflight(const SnapshotList& snapshots, const LocksFilter& filter);

  const WebConfig web_;
  const SnapshotMetrics::Source source_;
  const ExporterInfo build_;
  BasicAuth auth_;
  std::string tls_pem_path_;  // key + certificate joined for CivetWeb; removed on destruction
  std::shared_ptr<SnapshotMetrics> metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  // The exposition text of the current snapshots, rendered once per new set of snapshots (a poll
  // publishes one per interval) and compressed at most once.
  MetricsCache metrics_cache_;
  PageCache page_cache_;  // the on-call view, per snapshot set and filter
  std::atomic<int> preflights_in_flight_{0};
};

// The longest ?wait= of /api/v1/preflight.
inline constexpr Duration kMaxPreflightWait = Duration(600'000);

// "HOST:PORT" / ":PORT" / "[v6]:PORT" -> CivetWeb listening_ports syntax, with "s" for TLS.
// ":PORT" means every address: "+PORT" (one socket for IPv6 and IPv4) when `ipv6`, else IPv4
// only. An IPv6 address ("[v6]:PORT") without `ipv6` cannot be served: "".
std::string CivetListeningPorts(const std::string& listen_address, bool tls, bool ipv6);

// Empty when this process can listen on IPv6 (CivetWeb built with it, and the host binds a
// dual-stack socket); else the reason it cannot.
std::string Ipv6Unavailable();

// Escapes text for HTML.
std::string HtmlEscape(const std::string& s);

}  // namespace pglock
