// Helpers for libpq connection strings (key=value or postgresql:// URIs): validation, password
// detection and a masked form that is safe to log or show. Thread-safe.
#pragma once

#include <string>

namespace pglock {

// True when libpq can parse the string; otherwise *why says why (without echoing the string).
bool ValidateConninfo(const std::string& conninfo, std::string* why);

// True when the string sets a password (password=..., or user:password@ in a URI).
bool ConninfoHasPassword(const std::string& conninfo);

// A description of the connection safe for logs: "host=... port=... dbname=... user=..." with any
// password replaced by "******". Never returns the raw input.
std::string MaskConninfo(const std::string& conninfo);

}  // namespace pglock
