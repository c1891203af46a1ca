// Debian 12's CivetWeb 1.15 loads OpenSSL with dlopen("libssl.so") and looks up
// SSL_get_peer_certificate, which OpenSSL 3 no longer exports (it became a macro for
// SSL_get1_peer_certificate); CivetWeb then calls a NULL pointer on every TLS connection. This
// tiny library has the SONAME "libssl.so": once the exporter has loaded it, CivetWeb's dlopen
// finds it by that name, and dlsym resolves the missing function here and everything else in
// its dependencies, the real libssl.so.3 and libcrypto.so.3. Built as libpglock_ssl_compat.so.
#include <openssl/ssl.h>

// OpenSSL 3's header turns the old name into a macro for the new one; the old name is the point.
#undef SSL_get_peer_certificate

extern "C" __attribute__((visibility("default"))) X509* SSL_get_peer_certificate(const SSL* ssl) {
  return SSL_get1_peer_certificate(ssl);
}
