#include "exporter/http/server.h"

#include <CivetServer.h>
#include <civetweb.h>
#include <dlfcn.h>
#include <limits.h>
#include <netinet/in.h>
#include <prometheus/exposer.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "exporter/http/gzip.h"
#include "exporter/http/oncall.h"
#include "exporter/http/oncall_html.h"
#include "exporter/http/oncall_json.h"
#include "exporter/http/page_text.h"
#include "exporter/http/runbooks.h"
#include "exporter/http/timeline_page.h"
#include "exporter/util/duration.h"

namespace pglock {
namespace {

// The one live server; CivetWeb's callbacks find it here. Set before the Exposer starts and
// cleared after it stopped, so a callback never sees a dangling pointer.
std::atomic<HttpServer*> g_server{nullptr};

void Reply(mg_connection* conn, int status, const char* reason, const char* content_type,
           const std::string& body, const char* extra_headers = "") {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\n%sConnection: close\r\n\r\n",
            status, reason, content_type, body.size(), extra_headers);
  mg_write(conn, body.data(), body.size());
}

// Loads the TLS shims (see compat/ssl_compat.cc and compat/crypto_compat.cc), crypto first: the
// ssl one depends on the same libcrypto. They are found next to the binary (a build tree), else
// in PGLOCK_SHIM_DIR_FROM_BIN relative to it (an installed tree: cmake/install.cmake), else
// beside $PGLOCK_SSL_COMPAT when that names the ssl shim. The handles are kept for the life of
// the process. Unavailable when a shim cannot be loaded. REQUIRES: called from Start() only
// (dlerror is not thread-safe).
Status LoadSslCompat() {
  static bool loaded = false;
  if (loaded) return Status::Ok();
  constexpr const char* kSsl = "libpglock_ssl_compat.so";
  constexpr const char* kCrypto = "libpglock_crypto_compat.so";
  const char* env =
      std::getenv("PGLOCK_SSL_COMPAT");  // NOLINT(concurrency-mt-unsafe): nothing sets env
  std::string dir;
  if (env != nullptr) {
    dir = env;
    dir.resize(dir.rfind('/') + 1);  // "" for a bare name: the current directory's files
  } else {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return Status::Unavailable("cannot locate the executable");
    exe[n] = '\0';
    const std::string exe_dir = std::string(exe, std::string_view(exe).rfind('/') + 1);
    dir = exe_dir;
    const std::string installed = exe_dir + PGLOCK_SHIM_DIR_FROM_BIN "/";
    if (access((dir + kSsl).c_str(), F_OK) != 0 && access((installed + kSsl).c_str(), F_OK) == 0) {
      dir = installed;
    }
  }
  const std::string ssl_path = env != nullptr ? std::string(env) : dir + kSsl;
  for (const std::string& path : {dir + kCrypto, ssl_path}) {
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      // NOLINTNEXTLINE(concurrency-mt-unsafe): the only dlopen of the process, under Start()
      return Status::Unavailable(std::string("TLS needs ") + path +
                                 " (built with the exporter): " + dlerror());
    }
  }
  loaded = true;
  return Status::Ok();
}

// A decoded query-string parameter; "" when absent or longer than 1 KB.
std::string QueryParam(const mg_request_info* info, const char* name) {
  if (info->query_string == nullptr) return "";
  char buf[1024];
  const int n =
      mg_get_var(info->query_string, std::strlen(info->query_string), name, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string CivetListeningPorts(const std::string& listen_address, bool tls, bool ipv6) {
  std::string addr = listen_address;
  if (!addr.empty() && addr[0] == ':') {
    addr = (ipv6 ? "+" : "") + addr.substr(1);  // ":9716" -> all interfaces
  } else if (addr.rfind("0.0.0.0:", 0) == 0) {
    addr = addr.substr(8);  // every IPv4 address, as written
  } else if (!addr.empty() && addr[0] == '[' && !ipv6) {
    return "";
  }
  return addr + (tls ? "s" : "");
}

std::string Ipv6Unavailable() {
  if (mg_check_feature(8) == 0) {
    return "this CivetWeb library was built without IPv6 support, as Debian 12's is";
  }
  const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("no IPv6 sockets: ") + std::strerror(errno);
  const int off = 0;
  setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) == 0;
  const int bind_errno = errno;
  close(fd);
  if (!bound) return std::string("cannot bind an IPv6 socket: ") + std::strerror(bind_errno);
  return "";
}

HttpServer::HttpServer(const WebConfig& web, SnapshotMetrics::Source source, ExporterInfo build)
    : web_(web),
      source_(std::move(source)),
      build_(std::move(build)),
      auth_(web.basic_auth_users) {}

namespace {

// The listening_ports option for web.listen_address in *ports; Unavailable when it cannot be
// served. Logs when ":PORT" falls back to IPv4 only.
Status ListeningPortsOption(const WebConfig& web, bool tls, std::string* ports) {
  const std::string no_ipv6 = Ipv6Unavailable();
  *ports = CivetListeningPorts(web.listen_address, tls, no_ipv6.empty());
  if (ports->empty()) {
    return Status::Unavailable("cannot listen on " + web.listen_address + ": " + no_ipv6);
  }
  if (!no_ipv6.empty() && web.listen_address[0] == ':') {
    spdlog::info("listening on IPv4 only: {}", no_ipv6);
  }
  return Status::Ok();
}

// CivetWeb wants the key and the certificate in one PEM file: writes them to a new private file
// whose name goes to *pem_path as soon as it exists (so that the caller removes it, whatever
// happens next). IoFailed when a file cannot be read or written.
Status WriteTlsPem(const WebConfig& web, std::string* pem_path) {
  std::string key, cert;
  if (!ReadFile(web.tls_key_file, &key) || !ReadFile(web.tls_cert_file, &cert)) {
    return Status::IoFailed("cannot read tls_cert_file or tls_key_file");
  }
  char path[] = "/tmp/pglock_exporter_tls_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return Status::IoFailed("cannot create a private file for the TLS key");
  *pem_path = path;
  const std::string pem = key + "\n" + cert + "\n";
  // mkstemp creates the file 0600 already; fchmod makes sure whatever the umask did.
  const bool written = fchmod(fd, 0600) == 0 &&
                       write(fd, pem.data(), pem.size()) == static_cast<ssize_t>(pem.size());
  close(fd);
  if (!written) return Status::IoFailed("cannot write the private TLS file");
  return Status::Ok();
}

}  // namespace

Status HttpServer::Start(const WebConfig& web, const SnapshotMetrics::Source& source,
                         const ExporterInfo& build, std::unique_ptr<HttpServer>* started) {
  if (g_server.load() != nullptr) {
    return Status::Unavailable("an HTTP server is already running in this process");
  }
  std::unique_ptr<HttpServer> server(new HttpServer(web, source, build));
  const bool tls = !web.tls_cert_file.empty();
  std::string ports;
  if (Status s = ListeningPortsOption(web, tls, &ports); !s.ok()) return s;
  std::vector<std::string> options = {
      "listening_ports",    ports,
      "num_threads",        std::to_string(web.max_connections),
      "request_timeout_ms", std::to_string(web.request_timeout.count()),
      "enable_keep_alive",  "no",
  };
  if (tls) {
    if (Status s = LoadSslCompat(); !s.ok()) return s;
    // The PEM file is removed by ~HttpServer, whatever happens next.
    if (Status s = WriteTlsPem(web, &server->tls_pem_path_); !s.ok()) return s;
    options.insert(options.end(), {"ssl_certificate", server->tls_pem_path_, "ssl_protocol_version",
                                   "4"});  // TLS 1.2+
  }
  static CivetCallbacks callbacks;
  callbacks.begin_request = &HttpServer::BeginRequest;
  callbacks.log_message = [](const mg_connection*, const char* message) {
    spdlog::debug("http: {}", message);
    return 1;
  };
  // The telemetry path is answered in BeginRequest from a per-snapshot cache of these families
  // (see ServeMetrics()); nothing is registered with the Exposer. It exists before the first
  // request can arrive.
  server->metrics_ = std::make_shared<SnapshotMetrics>(source, build);
  g_server.store(server.get());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(options, &callbacks);
  } catch (const std::exception& e) {
    g_server.store(nullptr);
    return Status::Unavailable("cannot listen on " + web.listen_address + ": " + e.what());
  }
  *started = std::move(server);
  return Status::Ok();
}

HttpServer::~HttpServer() {
  exposer_.reset();  // stops CivetWeb's threads: no callback runs after this
  if (g_server.load() == this) g_server.store(nullptr);
  if (!tls_pem_path_.empty()) unlink(tls_pem_path_.c_str());
}

std::vector<int> HttpServer::ListeningPorts() const {
  return exposer_ ? exposer_->GetListeningPorts() : std::vector<int>{};
}

int HttpServer::BeginRequest(mg_connection* conn) {
  HttpServer* server = g_server.load();
  if (server == nullptr) return 0;
  try {
    return server->Handle(conn);
  } catch (...) {
    return 0;  // never let an exception cross into C
  }
}

int HttpServer::Handle(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string uri = info->local_uri != nullptr ? info->local_uri : "";
  if (uri == "/-/healthy") {
    Reply(conn, 200, "OK", "text/plain; charset=utf-8", "Healthy\n");
    return 200;
  }
  if (auth_.enabled() && !auth_.Check(mg_get_header(conn, "Authorization"))) {
    Reply(conn, 401, "Unauthorized", "text/plain; charset=utf-8", "Unauthorized\n",
          "WWW-Authenticate: Basic realm=\"pglock_exporter\", charset=\"UTF-8\"\r\n");
    return 401;
  }
  if (uri == "/-/ready") {
    // Config loaded and HTTP serving: never depends on the database.
    Reply(conn, 200, "OK", "text/plain; charset=utf-8", "Ready\n");
    return 200;
  }
  if (uri == "/") {
    Reply(conn, 200, "OK", "text/html; charset=utf-8", LandingPage());
    return 200;
  }
  if (uri == web_.telemetry_path) {
    ServeMetrics(conn);
    return 200;
  }
  if (uri == "/api/v1/preflight") return ServePreflight(conn);
  if (const int status = ServeOnCall(conn, uri); status != 0) return status;
  constexpr std::string_view kRunbooks = "/runbooks/";
  if (uri.rfind(kRunbooks, 0) == 0) {
    if (const Runbook* r = FindRunbook(std::string_view(uri).substr(kRunbooks.size()))) {
      Reply(conn, 200, "OK", "text/html; charset=utf-8", RunbookPage(*r));
      return 200;
    }
  }
  Reply(conn, 404, "Not Found", "text/plain; charset=utf-8", "Not Found\n");
  return 404;
}

void HttpServer::ServeMetrics(mg_connection* conn) {
  constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
  const auto render = [this] { return metrics_->Text(); };
  const char* accept_encoding = mg_get_header(conn, "Accept-Encoding");
  if (accept_encoding != nullptr && AcceptsGzip(accept_encoding)) {
    if (const auto gzip = metrics_cache_.Gzip(source_(), render)) {
      Reply(conn, 200, "OK", kContentType, *gzip,
            "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n");
      return;
    }
  }
  Reply(conn, 200, "OK", kContentType, *metrics_cache_.Plain(source_(), render),
        "Vary: Accept-Encoding\r\n");
}

int HttpServer::ServeOnCall(mg_connection* conn, const std::string& uri) {
  const bool html = uri == "/locks";
  const bool timeline = uri == "/api/v1/timeline";
  if (!html && !timeline && uri != "/api/v1/locks" && uri != "/api/v1/events") return 0;
  const mg_request_info* info = mg_get_request_info(conn);
  LocksFilter filter{QueryParam(info, "target"), QueryParam(info, "lock")};
  const std::string since_text = QueryParam(info, "since");
  if (html || timeline) {
    if (const Status s = ParseTimelineSince(since_text, &filter.since); !s.ok()) {
      Reply(conn, 400, "Bad Request", "text/plain; charset=utf-8", s.message() + "\n");
      return 400;
    }
  }
  // The variant key: the path and the values, separated by a byte no URL decodes to here.
  const std::string variant =
      uri + '\x01' + filter.target + '\x01' + filter.lock + '\x01' + std::to_string(filter.since);
  const SnapshotList snapshots = source_();
  const auto page = page_cache_.Get(snapshots, variant, [&] {
    if (html) return RenderLocksPage(snapshots, filter);
    if (timeline) return RenderTimelineJson(snapshots, filter, filter.since);
    return uri == "/api/v1/locks" ? RenderLocksJson(snapshots, filter)
                                  : RenderEventsJson(snapshots, filter);
  });
  if (html) {
    const std::string section = PagePreflight(snapshots, filter);
    if (!section.empty()) {
      std::string body = *page;
      const auto form = body.find("</form>\n");
      body.insert(form == std::string::npos ? 0 : form + 8, section);
      Reply(conn, 200, "OK", "text/html; charset=utf-8", body);
      return 200;
    }
  }
  Reply(conn, 200, "OK", html ? "text/html; charset=utf-8" : "application/json", *page);
  return 200;
}

std::string HttpServer::PagePreflight(const SnapshotList& snapshots, const LocksFilter& filter) {
  // Only "schema.table": a lock or lease name typed in the box is not asked about.
  PreflightRequest request;
  request.table = filter.lock;
  std::string why;
  if (filter.lock.find('.') == std::string::npos ||
      !ParseTableName(filter.lock, &request.parsed, &why) || !request.parsed.schema) {
    return "";
  }
  std::shared_ptr<const TargetSnapshot> snap;
  int matching = 0;
  for (const auto& t : snapshots) {
    if (t && (filter.target.empty() || t->target == filter.target) && t->up) {
      snap = t;
      ++matching;
    }
  }
  if (matching != 1) return "";
  std::optional<PreflightAnswer> answer;
  if (AskPreflight(*snap, request, Duration(0), &answer, &why) != 200) return "";
  return PreflightHtml(*answer);
}

namespace {

const char* ReasonOf(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 409:
      return "Conflict";
    case 429:
      return "Too Many Requests";
    default:
      return "Service Unavailable";
  }
}

// "AccessShareLock, RowShareLock, ..."
std::string TableLockModes() {
  std::string o;
  for (const char* m : kTableLockModes) o += (o.empty() ? "" : ", ") + std::string(m);
  return o;
}

}  // namespace

int HttpServer::ServePreflight(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  std::string target = QueryParam(info, "target");
  const auto refuse = [&](int status, const std::string& error) {
    Reply(conn, status, ReasonOf(status), "application/json",
          "{\"error\":" + J(error) + ",\"target\":" + J(target) + "}\n");
    return status;
  };
  PreflightRequest request;
  request.table = QueryParam(info, "table");
  std::string why;
  if (!ParseTableName(request.table, &request.parsed, &why)) return refuse(400, "table: " + why);
  if (const std::string mode = QueryParam(info, "mode"); !mode.empty()) {
    if (!IsTableLockMode(mode)) {
      return refuse(400, "mode: not a table lock mode as PostgreSQL names it: " + mode +
                             " (one of " + TableLockModes() + ")");
    }
    request.mode = mode;
  }
  request.role = QueryParam(info, "role");
  if (request.role.size() > 63) return refuse(400, "role: longer than 63 bytes");
  const std::string fail = QueryParam(info, "fail");
  if (!fail.empty() && fail != "0" && fail != "1" && fail != "true" && fail != "false") {
    return refuse(400, "fail: 1 or 0");
  }
  const bool fail_unless_clear = fail == "1" || fail == "true";
  Duration wait{0};
  if (const std::string text = QueryParam(info, "wait"); !text.empty()) {
    const Status parsed = ParseDuration(text, &wait);
    if (!parsed.ok() || wait > kMaxPreflightWait) {
      return refuse(400, "wait: a duration up to " + FormatDuration(kMaxPreflightWait) +
                             " (\"60s\", \"5m\")" + (parsed.ok() ? "" : ": " + parsed.message()));
    }
  }
  const SnapshotList snapshots = source_();
  std::shared_ptr<const TargetSnapshot> snap;
  std::string names;
  for (const auto& t : snapshots) {
    if (!t) continue;
    names += (names.empty() ? "" : ", ") + t->target;
    if (t->target == target || (target.empty() && snapshots.size() == 1)) snap = t;
  }
  if (!snap) {
    return refuse(400, target.empty() ? "target: give ?target= (one of " + names + ")"
                                      : "target: no target " + target + " (one of " + names + ")");
  }
  target = snap->target;
  std::optional<PreflightAnswer> answer;
  std::string error;
  if (const int status = AskPreflight(*snap, request, wait, &answer, &error); status != 200) {
    return refuse(status, error);
  }
  const int status = fail_unless_clear && answer->verdict != "clear" ? 409 : 200;
  Reply(conn, status, ReasonOf(status), "application/json",
        PreflightJson(*answer, std::chrono::duration<double>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count()));
  return status;
}

int HttpServer::AskPreflight(const TargetSnapshot& snap, const PreflightRequest& request,
                             Duration wait, std::optional<PreflightAnswer>* answer,
                             std::string* error) {
  if (!snap.preflight) {
    *error = "target " + snap.target + " has no poller";
    return 503;
  }
  // Held requests occupy HTTP threads: at most a quarter of them, so that scrapes are served.
  const int limit = std::max(1, web_.max_connections / 4);
  if (preflights_in_flight_.fetch_add(1) >= limit) {
    preflights_in_flight_.fetch_sub(1);
    *error = "too many preflight requests at once (" + std::to_string(limit) +
             ", a quarter of web.max_connections)";
    return 429;
  }
  struct Release {
    std::atomic<int>* n;
    ~Release() { n->fetch_sub(1); }
  } release{&preflights_in_flight_};
  const auto until = std::chrono::steady_clock::now() + wait;
  // Each round is answered by the target's next poll: a held request asks once a poll, no more.
  do {
    const auto ticket = snap.preflight->Submit(request);
    if (!ticket) {
      *error = "too many preflight requests wait for target " + snap.target + "'s next poll";
      return 429;
    }
    const double within = snap.preflight->answer_within();
    auto next = ticket->Wait(within);
    if (!next) {
      if (*answer) break;  // a held request keeps the last answer
      *error = "no answer from target " + snap.target + "'s poller within " +
               FormatDuration(Duration(static_cast<int64_t>(within * 1000)));
      return 503;
    }
    *answer = std::move(next);
    if ((*answer)->status != 200) {
      *error = (*answer)->error;
      return (*answer)->status;
    }
  } while ((*answer)->verdict != "clear" && std::chrono::steady_clock::now() < until);
  return 200;
}

std::string HttpServer::LandingPage() const {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>pglock_exporter</title>"
       "<style>body{font-family:sans-serif;margin:2em}td,th{padding:.2em 1em;text-align:left}"
       ".up{color:#070}.down{color:#b00}</style></head><body>\n"
    << "<h1>pglock_exporter</h1>\n<p>PostgreSQL advisory locks, idle-in-transaction holders, "
       "timeouts and leases. Version "
    << HtmlEscape(build_.version) << " (" << HtmlEscape(build_.revision) << ").</p>\n"
    << "<ul><li><a href=\"" << HtmlEscape(web_.telemetry_path) << "\">Metrics</a></li>"
    << "<li><a href=\"/locks\">Locks: waits, holders, leases and recent events</a> (JSON: "
       "<a href=\"/api/v1/locks\">locks</a>, <a href=\"/api/v1/events\">events</a>, "
       "<a href=\"/api/v1/timeline\">timeline</a>; before a migration: "
       "<a href=\"/api/v1/preflight?table=public.orders\">preflight</a>)</li>"
    << "<li><a href=\"/runbooks/README\">Runbooks</a></li>"
    << "<li><a href=\"/-/healthy\">Health</a></li><li><a href=\"/-/ready\">Readiness</a></li>"
       "</ul>\n<h2>Targets</h2>\n<table><tr><th>target</th><th>state</th><th>server</th>"
       "<th>last poll took</th><th>last error</th></tr>\n";
  for (const auto& t : source_()) {
    if (!t) continue;
    o << "<tr><td>" << HtmlEscape(t->target) << "</td><td class=\"" << (t->up ? "up" : "down")
      << "\">" << HtmlEscape(t->state) << "</td><td>" << HtmlEscape(t->server_version)
      << "</td><td>" << t->poll_duration * 1000 << " ms</td><td>"
      << HtmlEscape(t->up ? "" : t->last_error) << "</td></tr>\n";
  }
  o << "</table>\n</body></html>\n";
  return o.str();
}

}  // namespace pglock
