// PGLOCK_UNDER_ASAN: defined in a translation unit compiled with AddressSanitizer, by g++
// (__SANITIZE_ADDRESS__) or by clang (__has_feature(address_sanitizer): clang 14 does not define
// the g++ macro). For the tests whose bounds are the allocator's: under AddressSanitizer freed
// memory waits in its quarantine, so resident size and CPU are its own.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PGLOCK_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PGLOCK_UNDER_ASAN 1
#endif
#endif
