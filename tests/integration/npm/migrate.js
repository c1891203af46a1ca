// Runs one migration with a real migration tool from the npm registry, as a deploy step would:
//   node migrate.js knex|node-pg-migrate <postgres url> <column>
// The migration adds integer column <column> to public.orders (an ALTER TABLE: ACCESS EXCLUSIVE).
// Prints "migrated" and exits 0 once the tool reports it done; any error exits 1.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");

const [tool, url, column] = process.argv.slice(2);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pglock-migrate-"));

function done(error) {
  fs.rmSync(dir, { recursive: true, force: true });
  if (error) {
    console.error(String(error && error.stack ? error.stack : error));
    process.exit(1);
  }
  console.log("migrated");
  process.exit(0);
}

if (tool === "knex") {
  fs.writeFileSync(path.join(dir, "20260101000000_add_column.js"),
    `exports.up = (knex) => knex.schema.alterTable('orders', (t) => { t.integer(${JSON.stringify(column)}); });\n` +
    `exports.down = (knex) => knex.schema.alterTable('orders', (t) => { t.dropColumn(${JSON.stringify(column)}); });\n`);
  const knex = require("knex")({ client: "pg", connection: url });
  knex.migrate.latest({ directory: dir, tableName: "knex_migrations" })
    .then(() => knex.destroy())
    .then(() => done(null), (e) => knex.destroy().finally(() => done(e)));
} else if (tool === "node-pg-migrate") {
  fs.writeFileSync(path.join(dir, "1767225600000_add-column.cjs"),
    `exports.up = (pgm) => { pgm.addColumn('orders', { ${JSON.stringify(column)}: 'integer' }); };\n` +
    `exports.down = (pgm) => { pgm.dropColumn('orders', ${JSON.stringify(column)}); };\n`);
  const bin = path.join(process.env.NODE_PATH, ".bin", "node-pg-migrate");
  const r = spawnSync(bin, ["up", "-m", dir, "--migrations-table", "pgmigrations"],
    { env: { ...process.env, DATABASE_URL: url }, encoding: "utf8" });
  process.stderr.write(r.stdout || "");
  process.stderr.write(r.stderr || "");
  done(r.status === 0 ? null : `node-pg-migrate exited ${r.status}`);
} else {
  done(`unknown tool ${tool}`);
}
