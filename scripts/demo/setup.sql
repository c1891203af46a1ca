-- Schema and roles of the pglock_exporter demo. Run by scripts/demo.sh as the bootstrap superuser,
-- connected to the maintenance database `postgres`. Every role gets the password in the environment
-- variable PGLOCK_DEMO_PASSWORD (the demo's pgpass file holds it for the clients).
\set ON_ERROR_STOP on
\getenv pw PGLOCK_DEMO_PASSWORD

CREATE DATABASE app;

-- Application roles. Each incident (scripts/demo/README.md) gets its own role, so the exporter's
-- usename labels tell them apart.
CREATE ROLE billing LOGIN PASSWORD :'pw';      -- (a) the "pool of four" and (e) the pooler client
CREATE ROLE reporting LOGIN PASSWORD :'pw';    -- (b) report-daily / nightly-export locks
CREATE ROLE app_worker LOGIN PASSWORD :'pw';   -- (c) the rebuild job
CREATE ROLE scheduler LOGIN PASSWORD :'pw';    -- (d) the lease runner
CREATE ROLE shop LOGIN PASSWORD :'pw';         -- (f) the pile-up: checkout, a migration, storefront readers

-- (c) A per-role, per-database timeout that no application config mentions. It applies to
-- sessions started after this statement, i.e. to every app_worker session of the demo.
ALTER ROLE app_worker IN DATABASE app SET idle_in_transaction_session_timeout = '45s';

-- The exporter's least-privilege role: pg_monitor to see every session in pg_stat_activity and
-- pg_locks, SELECT on the lease table, nothing else.
CREATE ROLE pglock_exporter LOGIN PASSWORD :'pw';
GRANT pg_monitor TO pglock_exporter;

\connect app

-- The leases table: a lease is a row (name, holder, taken_at, expires_at).
CREATE TABLE leases (
  name       text PRIMARY KEY,
  holder     text NOT NULL,
  taken_at   timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
GRANT SELECT, INSERT, UPDATE, DELETE ON leases TO scheduler;
GRANT SELECT ON leases TO pglock_exporter;

-- The pile-up (README (f)): a table the shop's migration alters while a checkout transaction sits
-- idle on one of its rows. The migration must own the table to ALTER it.
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL);
INSERT INTO orders VALUES (1, 'new'), (2, 'new');
ALTER TABLE orders OWNER TO shop;
