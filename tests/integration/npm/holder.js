// Holds an advisory lock with a real lock library from npm, idle outside a transaction, the way an
// application does, until the test says how to end: "exit" (process.exit() without unlocking),
// "finish" (the library's own unlock and close), or SIGKILL from the test.
//   node holder.js advisory-lock <database url>     mutex.lock(), then release()
//   node holder.js node-pg-migrate <database url>   a migration run holding the library's lock
//                                                   while a non-transactional step waits
// Prints "held <key>" once the lock is held, <key> as pg_advisory_lock takes it. The libraries come
// from NODE_PATH (scripts/lib/lock_libraries.sh).
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const readline = require("readline");
const { pathToFileURL } = require("url");

// Resolves with the first command read from stdin.
function command() {
  return new Promise((resolve) => {
    const lines = readline.createInterface({ input: process.stdin });
    lines.once("line", (line) => resolve(line.trim()));
    lines.once("close", () => resolve("finish"));
  });
}

async function advisoryLock(url) {
  const advisoryLock = require("advisory-lock").default;
  const name = "pglock-test-leader";
  const [k1, k2] = require("advisory-lock").strToKey(name);
  const release = await advisoryLock(url)(name).lock();
  console.log(`held ${k1}, ${k2}`);
  if ((await command()) === "exit") process.exit(0);
  await release();
}

async function nodePgMigrate(url) {
  // An ES module: imported by the path that CommonJS resolution (and so NODE_PATH) finds.
  const { runner, PG_MIGRATE_LOCK_ID } = await import(
    pathToFileURL(require.resolve("node-pg-migrate")).href
  );
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pglock-migrations-"));
  // A step outside any transaction (CREATE INDEX CONCURRENTLY, a backfill): the run's session
  // holds the lock and sits idle meanwhile.
  fs.writeFileSync(
    path.join(dir, `${Date.now()}_hold.js`),
    "exports.up = async (pgm) => { pgm.noTransaction(); await globalThis.pglockHold(); };\n",
  );
  globalThis.pglockHold = async () => {
    // The runner has read the migrations by now; the test may end this process with a kill or
    // process.exit(), which skip the finally below.
    fs.rmSync(dir, { recursive: true, force: true });
    console.log(`held ${PG_MIGRATE_LOCK_ID}`);
    if ((await command()) === "exit") process.exit(0);
  };
  try {
    await runner({
      databaseUrl: url,
      dir,
      direction: "up",
      migrationsTable: "pgmigrations",
      singleTransaction: false,
      checkOrder: false,
      log: () => {},
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const [library, url] = process.argv.slice(2);
const run = { "advisory-lock": advisoryLock, "node-pg-migrate": nodePgMigrate }[library];
if (!run || !url) {
  console.error("usage: holder.js advisory-lock|node-pg-migrate <database url>");
  process.exit(2);
}
run(url).then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
