-- The bigint key that pg_advisory_lock(hashtextextended(text, 0)) uses for a configured key_text.
SELECT hashtextextended($1, 0)
