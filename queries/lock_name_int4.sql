-- The int4 key that pg_advisory_lock(key1, hashtext(text)) uses for a configured key2_text.
SELECT hashtext($1)
