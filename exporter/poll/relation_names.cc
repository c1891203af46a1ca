#include "exporter/poll/relation_names.h"

#include <utility>

#include "exporter/pg/columns.h"
#include "exporter/queries.h"

namespace pglock {
namespace {

bool HasRelation(const LoggedLockTag& tag) { return tag.relation != 0; }

}  // namespace

std::vector<LoggedLockTag*> RelationNames::Tags(std::vector<LockRecord>* records) {
  std::vector<LoggedLockTag*> tags;
  for (LockRecord& r : *records) {
    if (HasRelation(r.lock)) tags.push_back(&r.lock);
    for (DeadlockProcess& p : r.cycle) {
      if (HasRelation(p.lock)) tags.push_back(&p.lock);
    }
  }
  return tags;
}

Status RelationNames::Name(PgConnection& conn, const QueryTimeouts& timeouts,
                           SteadyClock::time_point deadline, std::vector<LockRecord>* records) {
  const std::vector<LoggedLockTag*> tags = Tags(records);
  if (tags.empty()) return Status::Ok();
  // Before the database's OID is known every OID is looked up; the answer says which apply.
  auto ours = [&](const LoggedLockTag& t) {
    return t.database == 0 || datid_ == 0 || t.database == datid_;
  };
  std::vector<uint32_t> unknown;
  for (const LoggedLockTag* t : tags) {
    if (ours(*t) && names_.count(t->relation) == 0 && unknown.size() < kMaxRelationLookups) {
      unknown.push_back(t->relation);
    }
  }
  Status s = Status::Ok();
  if (!unknown.empty()) s = LookUp(conn, timeouts, deadline, unknown);
  for (LoggedLockTag* t : tags) {
    if (datid_ == 0 || (t->database != 0 && t->database != datid_)) continue;
    const auto it = names_.find(t->relation);
    if (it != names_.end()) t->relation_name = it->second;
  }
  return s;
}

Status RelationNames::LookUp(PgConnection& conn, const QueryTimeouts& timeouts,
                             SteadyClock::time_point deadline, const std::vector<uint32_t>& oids) {
  std::string array = "'{";
  for (const uint32_t oid : oids) {
    if (array.size() > 2) array += ',';
    array += std::to_string(oid);
  }
  array += "}'";
  StatementBatch batch;
  batch.Add("relation_names", FillTemplate(queries::kRelationNames, {{"oids", array}}));
  BatchResults results;
  if (Status s = batch.Run(conn, timeouts, deadline, &results); !s.ok()) return s;
  const PgResult& r = *results.Find("relation_names");
  Columns c(r, "relation_names");
  const int datid = c["datid"], relid = c["relid"], name = c["name"];
  if (Status s = c.status(); !s.ok()) return s;
  if (names_.size() + oids.size() > kMaxRelationNames) names_.clear();
  for (const uint32_t oid : oids) names_[oid];  // "" unless found below
  for (int i = 0; i < r.Rows(); ++i) {
    datid_ = static_cast<uint32_t>(r.Int(i, datid).value_or(0));
    if (r.IsNull(i, relid)) continue;
    names_[static_cast<uint32_t>(r.Int(i, relid).value_or(0))] = r.String(i, name);
  }
  return Status::Ok();
}

void RelationNames::Forget() {
  datid_ = 0;
  names_.clear();
}

}  // namespace pglock
