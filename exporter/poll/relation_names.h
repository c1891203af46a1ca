// Names the relations of the server log's lock records as the poll names them: the log gives a
// relation by OID ("tuple (0,5) of relation 16407 of database 16384"), the poll by schema.table
// (queries/advisory_locks.sql). The poller looks the OIDs up in the catalog
// (queries/relation_names.sql), on its own connection within the poll's deadline, never on the
// scrape path: at most kMaxRelationLookups OIDs a poll, each remembered while the connection lives
// (at most kMaxRelationNames, then forgotten all at once). Only relations of the polled database
// and shared catalogs can be named; others keep the log's text. Thread-compatible: owned by one
// poller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/pg/batch.h"
#include "exporter/serverlog/lock_records.h"

namespace pglock {

inline constexpr size_t kMaxRelationLookups = 200;
inline constexpr size_t kMaxRelationNames = 10'000;

class RelationNames {
 public:
  // Sets LoggedLockTag::relation_name of each record's lock and of its deadlock cycle's locks
  // where the relation is this database's or shared. The Status is not ok when the lookup failed
  // (the records keep what they had).
  Status Name(PgConnection& conn, const QueryTimeouts& timeouts, SteadyClock::time_point deadline,
              std::vector<LockRecord>* records);
  // A new connection (perhaps to another database): every name is looked up again.
  void Forget();

 private:
  // Every tag of `records` that has a relation.
  static std::vector<LoggedLockTag*> Tags(std::vector<LockRecord>* records);
  Status LookUp(PgConnection& conn, const QueryTimeouts& timeouts, SteadyClock::time_point deadline,
                const std::vector<uint32_t>& oids);

  uint32_t datid_ = 0;  // the polled database's OID, once known
  // relation OID -> schema.table, "" for an OID the catalog does not have
  std::unordered_map<uint32_t, std::string> names_;
};

}  // namespace pglock
