// The client against a live aetnaweb server (tests/client/test_typescript_client.py
// starts one and sets AETNAWEB_URL and the tokens). Run alone: start a server
// (`make run`), create tokens, export the variables below and `npm test`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import {
  AetnawebClient,
  ApiError,
  BadRequest,
  Conflict,
  Forbidden,
  METHOD_FOR_OPERATION,
  NotFound,
  OPERATIONS,
  RateLimited,
  Unauthorized,
  Unprocessable,
  type RequestBody,
} from "@aetnaweb/client";

const URL_ = required("AETNAWEB_URL");
const TOKEN = required("AETNAWEB_TOKEN");
const SCOPE = "acme:alice:proj";
const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: these tests run against a live server`);
  return value;
}

function client(token = TOKEN, options: Partial<ConstructorParameters<typeof AetnawebClient>[0]> = {}) {
  return new AetnawebClient({ url: URL_, token, retries: 0, ...options });
}

/** A fresh project under Alice's subtree, so each test starts from an empty scope. */
function freshScope(): string {
  return `acme:alice:ts${Math.random().toString(36).slice(2, 10)}`;
}

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

test("remember then recall: the fact comes back first", async () => {
  const alice = client();
  const scope = freshScope();
  const stored = await alice.remember({ scope, text: "My backup email is alice@example.org", session_id: "s1" });
  const [record] = stored.records;
  assert.equal(record.status, "active");
  const recalled = await alice.recall({ scope, query: "backup email" });
  assert.equal(recalled.candidates[0].record_id, record.record_id);
  assert.equal(recalled.returned_ids[0], record.record_id);
  assert.match(recalled.audit_event_id, /.+/);
});

test("every memory operation answers as its generated type says", async () => {
  const alice = client();
  const scope = freshScope();
  assert.equal((await alice.whoami()).scope, "acme:alice:*");
  const stored = await alice.remember({ scope, key: "deploy window", value: "Tuesdays 9-11", kind: "ops" });
  const recordId = stored.records[0].record_id;
  const block = await alice.recallBlock({ scope, query: "deploy window", min_score: 0 });
  assert.ok(block.record_ids.includes(recordId));
  assert.ok((await alice.persona({ scope })).record_ids.includes(recordId));
  const detail = (await alice.getRecord(recordId)) as { record: { content: string } };
  assert.equal(detail.record.content, "deploy window: Tuesdays 9-11");
  const corrected = await alice.correctRecord(recordId, { content: "deploy window: Wednesdays 9-11" });
  assert.deepEqual(corrected.superseded_ids, [recordId]);
  const history = await alice.recordHistory(corrected.record.record_id);
  assert.deepEqual(
    history.lineage.map((r) => r.record_id),
    [recordId, corrected.record.record_id],
  );
  const captured = await alice.capture({ scope, role: "assistant", content: "Sure, noted.", session_id: "s2" });
  assert.equal(captured.remembered, null);
  const logged = await alice.logAction({ scope, event_type: "agent.file_written", payload: { bytes: 3 } });
  assert.equal(logged.subject_id, scope);
  const episode = (await alice.remember({ scope, text: "My shell is zsh", session_id: "s3" })).episode_id;
  assert.ok(episode);
  const proposed = await alice.propose({ scope, facts: [{ content: "User likes zsh", evidence: [episode] }] });
  assert.equal(proposed.accepted[0].status, "quarantined");
  const scenes = await alice.scenes({ scope });
  assert.equal(scenes.items[0].session_id, "s3");
  const batch = await alice.rememberBatch({
    scope,
    items: [{ text: "My editor is helix" }, { key: "timezone", value: "Europe/Paris" }],
  });
  assert.equal(batch.items.length, 2);
  const imported = await alice.importConversation({
    scope,
    turns: [
      { role: "user", text: "I live in Lyon.", session_id: "s4" },
      { role: "assistant", text: "Noted.", session_id: "s4" },
    ],
  });
  assert.equal(imported.turns.length, 2);
  assert.ok(imported.records_stored >= 1);
});

test("metadata is stored, filtered on (typed), and listed through the cursor", async () => {
  const alice = client();
  const scope = freshScope();
  await alice.remember({ scope, text: "My ticket number is 42", force: true, metadata: { customer_id: 42 } });
  await alice.remember({ scope, text: "My ticket number is 43", force: true, metadata: { customer_id: "42" } });
  const numbers = await all(alice.iterRecords({ scope, metadata: { customer_id: 42 } }));
  assert.equal(numbers.length, 1);
  assert.equal(numbers[0].metadata?.customer_id, 42);
  const recalled = await alice.recall({ scope, query: "ticket", filters: { metadata: { customer_id: "42" } } });
  assert.ok(recalled.candidates.every((c) => c.metadata?.customer_id === "42"));
});

test("async iterators follow next_cursor: every record and scene exactly once, newest first", async () => {
  const alice = client();
  const scope = freshScope();
  const made: string[] = [];
  for (let i = 0; i < 5; i++) {
    const stored = await alice.remember({ scope, text: `My note ${i} is kept`, force: true, session_id: `s${i % 3}` });
    made.push(stored.records[0].record_id);
  }
  const pages: number[] = [];
  const counting = client(TOKEN, {
    fetch: async (input, init) => {
      pages.push(1);
      return fetch(input, init);
    },
  });
  const records = await all(counting.iterRecords({ scope, limit: 2 }));
  assert.deepEqual(
    records.map((r) => r.record_id),
    [...made].reverse(),
  );
  assert.equal(pages.length, 3); // 2 + 2 + 1
  const scenes = await all(alice.iterScenes({ scope, limit: 2 }));
  assert.deepEqual(scenes.map((s) => s.session_id).sort(), ["s0", "s1", "s2"]);
});

test("remember with expires_at: the records carry it; a past moment is refused and writes nothing", async () => {
  const alice = client();
  const scope = freshScope();
  const expiresAt = new Date(Date.now() + 2 * 86_400_000).toISOString();
  const stored = await alice.remember({ scope, text: "My gate code is 4711", expires_at: expiresAt });
  const batch = await alice.rememberBatch({ scope, items: [{ text: "My locker is 9", expires_at: expiresAt }] });
  const made = [stored.records[0].record_id, batch.items[0].records[0].record_id];
  const listed = await all(alice.iterRecords({ scope }));
  assert.deepEqual(listed.map((r) => r.record_id).sort(), made.sort());
  for (const record of listed) assert.equal(Date.parse(record.expires_at ?? ""), Date.parse(expiresAt));
  const other = freshScope();
  await assert.rejects(
    alice.remember({ scope: other, text: "My gate code is 1234", expires_at: "2001-01-01T00:00:00Z" }),
    (error: unknown) => error instanceof BadRequest && error.field === "expires_at",
  );
  assert.deepEqual(await all(alice.iterRecords({ scope: other })), []);
});

test("retention policies: set, listed, set again (replaced), removed; a bad one is refused", async () => {
  const alice = client();
  const scope = freshScope();
  const made = await alice.setRetentionPolicy({ scope, target: "episodes", keep_days: 30 });
  assert.match(made.policy_id, /^ret_/);
  assert.equal(made.keep_days, 30);
  const replaced = await alice.setRetentionPolicy({ scope, target: "episodes", keep_days: 7 });
  assert.equal(replaced.keep_days, 7);
  const listed = await alice.listRetentionPolicies({ scope });
  assert.deepEqual(
    listed.items.map((p) => [p.scope, p.target, p.keep_days, p.last_run_at]),
    [[scope, "episodes", 7, null]],
  );
  const removed = await alice.removeRetentionPolicy({ scope, target: "episodes" });
  assert.equal(removed.policy_id, replaced.policy_id);
  assert.deepEqual((await alice.listRetentionPolicies({ scope })).items, []);
  await assert.rejects(
    alice.removeRetentionPolicy({ scope, target: "episodes" }),
    (error: unknown) => error instanceof BadRequest && error.code === "retention_policy_refused",
  );
  await assert.rejects(
    alice.setRetentionPolicy({ scope, target: "records", keep_days: 0 }),
    (error: unknown) => error instanceof BadRequest && error.field === "keep_days",
  );
  const reader = client(required("AETNAWEB_READ_TOKEN"));
  await assert.rejects(
    reader.setRetentionPolicy({ scope, target: "records", keep_days: 3 }),
    (error: unknown) => error instanceof ApiError && [403, 404].includes(error.status),
  );
  assert.deepEqual((await alice.listRetentionPolicies({ scope })).items, []);
});

test("filters: $in, $ne and ranges on metadata, created_at ranges, in recall and in lists", async () => {
  const alice = client();
  const scope = freshScope();
  const tiers = ["gold", "silver", "bronze"];
  const made: Record<string, string> = {};
  for (const [i, tier] of tiers.entries()) {
    const stored = await alice.remember({
      scope,
      text: `My ${tier} ticket number is ${100 + i}`,
      force: true,
      metadata: { tier, score: i + 1 },
    });
    made[tier] = stored.records[0].record_id;
  }
  const recalled = await alice.recall({
    scope,
    query: "ticket number",
    min_score: 0,
    filters: { metadata: { tier: { $in: ["gold", "silver"] }, score: { $gte: 2 } } },
  });
  assert.deepEqual(recalled.returned_ids, [made.silver]);
  const notGold = await all(alice.iterRecords({ scope, metadata: { tier: { $ne: "gold" } } }));
  assert.deepEqual(notGold.map((r) => r.record_id).sort(), [made.silver, made.bronze].sort());
  const ranged = await all(alice.iterRecords({ scope, metadata: { score: { $gt: 1, $lte: 3 }, tier: { $in: ["bronze"] } } }));
  assert.deepEqual(ranged.map((r) => r.record_id), [made.bronze]);
  // created_at: everything was stored after an hour ago, nothing before it.
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  assert.equal((await all(alice.iterRecords({ scope, created_at: { $gte: hourAgo } }))).length, 3);
  assert.deepEqual(await all(alice.iterRecords({ scope, created_at: { $lt: hourAgo } })), []);
  const none = await alice.recall({ scope, query: "ticket number", filters: { created_at: { $lt: hourAgo } } });
  assert.deepEqual(none.returned_ids, []);
  // The filters parameter: the object recall takes, sent as JSON text.
  const viaFilters = await alice.listRecords({ scope, filters: { metadata: { tier: { $in: ["gold"] } } } });
  assert.deepEqual(viaFilters.items.map((r) => r.record_id), [made.gold]);
  const viaText = await alice.listRecords({ scope, filters: JSON.stringify({ created_at: { $gte: hourAgo } }) });
  assert.equal(viaText.items.length, 3);
  await assert.rejects(
    alice.listRecords({ scope, metadata: { tier: { $in: [] } } }),
    (error: unknown) => error instanceof BadRequest && typeof error.field === "string",
  );
});

test("an unknown body field is refused as BadRequest unknown_field, and nothing is written", async () => {
  const alice = client();
  const scope = freshScope();
  const body = { scope, text: "My shell is zsh", expires: "tomorrow" } as unknown as RequestBody<"remember">;
  await assert.rejects(
    alice.remember(body),
    (error: unknown) =>
      error instanceof BadRequest && error.code === "unknown_field" && error.field === "expires",
  );
  const batch = { scope, items: [{ text: "My editor is vim", colour: "red" }] } as unknown as RequestBody<"remember_batch">;
  await assert.rejects(
    alice.rememberBatch(batch),
    (error: unknown) => error instanceof BadRequest && error.code === "unknown_field",
  );
  assert.deepEqual(await all(alice.iterRecords({ scope })), []);
});

test("forget: preview, then apply exactly what it showed; nothing is left to read", async () => {
  const alice = client();
  const scope = freshScope();
  await alice.remember({ scope, text: "My backup email is alice@example.org" });
  const preview = await alice.forgetPreview({ scope, selector: "backup email" });
  assert.equal(preview.record_ids.length, 1);
  const receipt = await alice.forget({ scope, selector: "backup email", expected_record_ids: preview.record_ids });
  assert.equal(receipt.format, "aetnamem-deletion-receipt-v1");
  assert.deepEqual(receipt.purged_record_ids, preview.record_ids);
  assert.deepEqual(await all(alice.iterRecords({ scope, status: "active" })), []);
  assert.deepEqual((await alice.recall({ scope, query: "backup email" })).returned_ids, []);
});

test("a stale preview is a Conflict carrying the server's code, and nothing is purged", async () => {
  const alice = client();
  const scope = freshScope();
  await alice.remember({ scope, text: "My backup email is alice@example.org" });
  const stale = ["rec_doesnotexist"];
  await assert.rejects(
    alice.forget({ scope, selector: "backup email", expected_record_ids: stale }),
    (error: unknown) => error instanceof Conflict && error.status === 409 && typeof error.code === "string",
  );
  assert.equal((await all(alice.iterRecords({ scope, status: "active" }))).length, 1);
});

test("refusals are typed errors with the server's code and field, and write nothing", async () => {
  const alice = client();
  const scope = freshScope();
  await assert.rejects(
    alice.remember({ scope: "not a scope", text: "My shell is zsh" }),
    (error: unknown) => error instanceof BadRequest && error.code === "invalid_scope" && error.field === "scope",
  );
  await assert.rejects(
    alice.recall({ scope, query: "x", limit: 0 }),
    (error: unknown) => error instanceof BadRequest && error.field === "limit",
  );
  await assert.rejects(
    alice.getRecord("rec_nope"),
    (error: unknown) => error instanceof NotFound && error.code === "not_found",
  );
  await assert.rejects(
    client("aetna_not_a_token").whoami(),
    (error: unknown) => error instanceof Unauthorized && error.code === "unauthorized",
  );
  const reader = client(required("AETNAWEB_READ_TOKEN"));
  await assert.rejects(
    reader.remember({ scope, text: "My shell is fish" }),
    (error: unknown) => error instanceof Forbidden && error.code === "capability_missing",
  );
  await assert.rejects(
    alice.remember({ scope: "acme:bob:proj", text: "My shell is fish" }),
    (error: unknown) => error instanceof NotFound,
  );
  assert.deepEqual(await all(alice.iterRecords({ scope })), []);
});

test("a write's Idempotency-Key makes a repeat a replay; one key for another body is refused", async () => {
  const alice = client();
  const scope = freshScope();
  const idempotencyKey = crypto.randomUUID();
  const body: RequestBody<"remember"> = { scope, text: "My locker is number 12" };
  const first = await alice.remember(body, { idempotencyKey });
  const again = await alice.remember(body, { idempotencyKey });
  assert.deepEqual(again, first);
  assert.equal((await all(alice.iterRecords({ scope }))).length, 1);
  await assert.rejects(
    alice.remember({ scope, text: "My locker is number 13" }, { idempotencyKey }),
    (error: unknown) => error instanceof Unprocessable && error.code === "idempotency_key_reused",
  );
  // Two calls without a key are two writes: each sent its own key.
  const keys: string[] = [];
  const spying = client(TOKEN, {
    fetch: async (input, init) => {
      keys.push(new Headers(init?.headers).get("Idempotency-Key") ?? "none");
      return fetch(input, init);
    },
  });
  await spying.remember({ scope, text: "My desk is by the window", force: true });
  await spying.remember({ scope, text: "My desk is by the window", force: true });
  await spying.whoami();
  assert.equal(new Set(keys.slice(0, 2)).size, 2);
  assert.equal(keys[2], "none");
});

test("429 from the server: waited out (capped), retried, then RateLimited with Retry-After", async () => {
  const sent: string[] = [];
  const limited = client(required("AETNAWEB_LIMITED_TOKEN"), {
    rateLimitRetries: 1,
    maxRetryAfter: 0.05,
    fetch: async (input, init) => {
      sent.push(new Headers(init?.headers).get("Idempotency-Key") ?? "none");
      return fetch(input, init);
    },
  });
  await limited.whoami();
  await limited.whoami();
  sent.length = 0;
  const started = Date.now();
  const error = await limited.remember({ scope: SCOPE, text: "My shell is zsh" }).then(
    () => assert.fail("a third request in the minute must be refused"),
    (caught: unknown) => caught,
  );
  assert.ok(error instanceof RateLimited, String(error));
  assert.equal(error.code, "rate_limited");
  assert.ok(error.retryAfter !== null && error.retryAfter > 0 && error.retryAfter <= 60);
  assert.equal(sent.length, 2); // the call and its one retry
  assert.equal(new Set(sent).size, 1); // with the same Idempotency-Key
  assert.ok(Date.now() - started < 5000); // the wait was capped at maxRetryAfter
});

test("subject export: started as a job, awaited, downloaded as a ZIP", async () => {
  const dana = client(required("AETNAWEB_SUBJECT_TOKEN"));
  const subtree = "acme:dana:*";
  await dana.remember({ scope: "acme:dana:exports", text: "My phone number is 555-0199", force: true });
  const started = await dana.exportSubject({ scope: subtree, reference: "SAR-TS-1" });
  assert.equal(started.subtree, subtree);
  assert.equal(started.reference, "SAR-TS-1");
  assert.equal(typeof started.job_id, "number");
  const finished = await dana.waitForSubjectExport(started.job_id, { poll: 0.2, timeout: 60 });
  assert.equal(finished.status, "done", finished.error);
  assert.equal(finished.download_url, `/api/v1/memory/subject-exports/${started.job_id}/download`);
  assert.ok(finished.expires_at && Date.parse(finished.expires_at) > Date.now());
  assert.ok(Number(finished.result.records) >= 1);
  assert.equal((await dana.getSubjectExport(started.job_id)).job_id, started.job_id);
  const zip = await dana.downloadSubjectExport(started.job_id);
  assert.ok(zip instanceof Uint8Array);
  assert.equal(String.fromCharCode(zip[0], zip[1]), "PK");
  const digest = createHash("sha256").update(zip).digest("hex");
  assert.equal(digest, finished.file_sha256);
  // Another subtree's job is out of reach: 404, as if it did not exist.
  await assert.rejects(
    client().downloadSubjectExport(started.job_id),
    (error: unknown) => error instanceof NotFound && error.code === "not_found",
  );
  await assert.rejects(
    dana.downloadSubjectExport(999_999_999),
    (error: unknown) => error instanceof NotFound,
  );
  // A read-write token is no admin of the subtree: refused, no job started.
  await assert.rejects(
    client(required("AETNAWEB_READ_TOKEN")).exportSubject({ scope: "acme:alice:*", reference: "SAR-TS-2" }),
    (error: unknown) => error instanceof ApiError && [403, 404].includes(error.status),
  );
});

test("subject export, legal hold, erasure with its certificate", async () => {
  const dana = client(required("AETNAWEB_SUBJECT_TOKEN"));
  const subtree = "acme:dana:*";
  await dana.remember({ scope: "acme:dana:proj", text: "My phone number is 555-0100" });
  const exported = await dana.exportSubject({ scope: subtree, reference: "DSR-1" });
  assert.equal(typeof exported.job_id, "number");
  const hold = await dana.createLegalHold({ scope: subtree, reference: "CASE-7" });
  assert.equal(hold.scope, subtree);
  assert.equal((await dana.listLegalHolds({ scope: subtree })).items.length, 1);
  const held = await dana.eraseSubjectPreview({ scope: subtree });
  assert.equal(held.holds.length, 1);
  const lifted = await dana.liftLegalHold({ scope: subtree });
  assert.ok(lifted.lifted_at);
  const preview = await dana.eraseSubjectPreview({ scope: subtree });
  assert.equal(preview.confirmation, subtree);
  await assert.rejects(
    dana.eraseSubject({ scope: subtree, reference: "DSR-1", confirm: "acme:dana" }),
    (error: unknown) => error instanceof BadRequest && error.code === "subject_erasure_refused",
  );
  const started = await dana.eraseSubject({ scope: subtree, reference: "DSR-1", confirm: subtree });
  const job = await dana.getErasure(started.job_id);
  assert.equal(job.status, "done");
  const certificate = await dana.erasureCertificate(started.job_id);
  assert.equal(certificate.format, "aetnaweb-erasure-certificate-v1");
  assert.deepEqual(await all(dana.iterRecords({ scope: "acme:dana:proj", status: "active" })), []);
});

test("guarded actions and audit: stage, list (cursor), show, verify, export, checkpoints", async () => {
  const alice = client();
  const operation = JSON.parse(required("AETNAWEB_ACTION_OPERATION")) as RequestBody<"stage">["operations"][number];
  const staged = [];
  for (let i = 0; i < 3; i++) staged.push(await alice.stage({ scope: SCOPE, operations: [operation] }));
  const ids = (await all(alice.iterTransactions({ limit: 2 }))).map((t) => t.transaction_id);
  assert.deepEqual(ids.slice(0, 3), staged.map((t) => t.transaction_id).reverse());
  const shown = (await alice.getTransaction(staged[0].transaction_id)) as { transaction: { state: string } };
  assert.equal(shown.transaction.state, "awaiting_approval");
  assert.equal((await alice.verifyTransaction(staged[0].transaction_id)).valid, true);
  assert.equal((await alice.verifyAudit()).ok, true);
  const lines = (await alice.exportAudit({ subject: SCOPE })).trim().split("\n");
  assert.ok(lines.length > 0);
  assert.ok(lines.every((line) => (JSON.parse(line) as { subject_id: string }).subject_id === SCOPE));
  const first = JSON.parse(await alice.createCheckpoint()) as { format: string };
  assert.equal(first.format, "aetnamem-checkpoint-v1");
  await assert.rejects(
    alice.checkpointConsistency({ old: 999_999_999 }),
    (error: unknown) => error instanceof ApiError && [400, 404].includes(error.status),
  );
});

test("call() reaches any operation by its operationId", async () => {
  const alice = client();
  const scope = freshScope();
  const stored = await alice.call("remember", { body: { scope, text: "My cat is called Miso" } });
  const detail = await alice.call("get_record", { path: { record_id: stored.records[0].record_id } });
  assert.ok(JSON.stringify(detail).includes("Miso"));
  const page = await alice.call("list_records", { query: { scope, limit: 1 } });
  assert.equal(page.items.length, 1);
});

test("every operation the server serves has a client method", async () => {
  const served = (await (await fetch(`${URL_}/api/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { operationId: string }>>;
  };
  const ids = Object.values(served.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
  const methods = METHOD_FOR_OPERATION as Record<string, string>;
  const missing = ids.filter((id) => !(id in methods) || !(id in OPERATIONS));
  assert.deepEqual(missing, [], `operations without a client method: ${missing.join(", ")}`);
  const proto = AetnawebClient.prototype as unknown as Record<string, unknown>;
  for (const id of ids) assert.equal(typeof proto[methods[id]], "function", `${id} -> ${methods[id]}`);
});

test("src/generated.ts and src/operations.ts match a fresh generation from this server", async () => {
  const run = promisify(execFile);
  const script = resolve(PACKAGE, "scripts", "generate.mjs");
  const done = await run(process.execPath, [script, "--check"], { env: { ...process.env, AETNAWEB_URL: URL_ } }).catch(
    (error: { stdout: string; stderr: string }) => error,
  );
  assert.match(done.stdout, /match the served document/, `${done.stderr}\nrun \`npm run generate\``);
});

test("the README's quickstart is examples/quickstart.mjs, and it runs against the server", async () => {
  const example = readFileSync(resolve(PACKAGE, "examples", "quickstart.mjs"), "utf8");
  const readme = readFileSync(resolve(PACKAGE, "README.md"), "utf8");
  assert.ok(readme.includes("```js\n" + example + "```"), "README.md must quote examples/quickstart.mjs verbatim");
  const run = promisify(execFile);
  const env = { ...process.env, AETNAWEB_TOKEN: required("AETNAWEB_SUBJECT_TOKEN") };
  const { stdout } = await run(process.execPath, [resolve(PACKAGE, "examples", "quickstart.mjs")], { env });
  const lines = stdout.trim().split("\n");
  assert.match(lines[0], /dana@example\.org/);
  assert.match(lines[1], /dana@example\.org\.? \d\.\d\d$/);
  assert.match(stdout, /<relevant_memories>/);
  assert.match(stdout, /aetnamem-deletion-receipt-v1 \[ '[a-z]+_[0-9a-f]+' \]/);
  assert.equal(lines.at(-1), "invalid_scope scope");
});
