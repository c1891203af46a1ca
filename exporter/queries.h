// The SQL of every collector, embedded from queries/*.sql at build time (cmake/embed_sql.cmake):
// queries/foo_bar.sql becomes kFooBar. Nothing is read from disk at run time.
#pragma once

namespace pglock::queries {

extern const char* const kActivity;
extern const char* const kAdvisoryLocks;
extern const char* const kAdvisoryWaiters;
extern const char* const kDatabaseStats;
extern const char* const kLeaseTable;
extern const char* const kLeaseTableWrites;
extern const char* const kLockNameBigint;
extern const char* const kLockNameInt4;
extern const char* const kLockWaits;
extern const char* const kPgbouncerClients;
extern const char* const kPgbouncerPools;
extern const char* const kPgbouncerServers;
extern const char* const kPollTimeouts;
extern const char* const kServer;
extern const char* const kSessionSetup;
extern const char* const kSettingOverrides;
extern const char* const kSettings;

}  // namespace pglock::queries
