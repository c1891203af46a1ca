// Debian 12's CivetWeb 1.15 also loads "libcrypto.so", a name only libssl-dev provides. This
// library has that SONAME and no code of its own: it depends on the real libcrypto.so.3, so once
// the exporter has loaded it, CivetWeb's dlopen("libcrypto.so") finds it by name and dlsym
// resolves every function in that dependency. Built as libpglock_crypto_compat.so and loaded
// with libpglock_ssl_compat.so (see ssl_compat.cc and LoadSslCompat in ../server.cc).
