#!/usr/bin/env python3
"""Advisory lock keys derived the way client libraries derive them, independently of the
exporter's SQL recipes: the SHA-256 of a lock name (hashlib), its first 8 bytes read as

  bigint     one signed big-endian 64-bit integer (pg-advisory-lock for Node.js, django-pglocks)
  int4-be    two signed big-endian 32-bit integers, bytes 0-3 and 4-7
  int4-le    two signed little-endian 32-bit integers, bytes 0-3 and 4-7 (advisory-lock for
             Node.js: readInt32LE(0), readInt32LE(4))

Usage: library_keys.py FORM NAME. Prints the key, or the two keys separated by a comma, ready
for pg_advisory_lock(...).
"""
import hashlib
import struct
import sys

FORMATS = {"bigint": ">q", "int4-be": ">ii", "int4-le": "<ii"}


def main() -> int:
    form, name = sys.argv[1], sys.argv[2]
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    print(", ".join(str(k) for k in struct.unpack(FORMATS[form], digest[:8])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
