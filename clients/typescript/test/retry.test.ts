// Retries, waits and keys, against a scripted fetch (no server): the parts a live
// server cannot be made to misbehave for on demand (503s, dropped connections).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  AetnawebClient,
  BadRequest,
  Conflict,
  Gone,
  RateLimited,
  ServerError,
  TransportError,
  WaitTimeout,
  errorFor,
  retryAfterSeconds,
} from "@aetnaweb/client";

type Answer = { status: number; body?: unknown; headers?: Record<string, string> } | "drop";

function scripted(answers: Answer[]) {
  const seen: { method: string; url: string; key: string | null; body: string | undefined }[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const headers = new Headers(init?.headers);
    seen.push({ method: init?.method ?? "GET", url: String(input), key: headers.get("Idempotency-Key"), body: init?.body as string | undefined });
    const answer = answers.shift() ?? { status: 200, body: { scope: "a:b:c" } };
    if (answer === "drop") throw new TypeError("fetch failed");
    return new Response(JSON.stringify(answer.body ?? {}), {
      status: answer.status,
      headers: { "Content-Type": "application/json", ...answer.headers },
    });
  };
  return { fetch: fetch as typeof globalThis.fetch, seen };
}

const limited = (retryAfter?: string): Answer => ({
  status: 429,
  body: { error: "rate_limited", field: null, detail: "slow down" },
  headers: retryAfter === undefined ? {} : { "Retry-After": retryAfter },
});

function client(fetch: typeof globalThis.fetch, options: object = {}) {
  return new AetnawebClient({ url: "http://server.test/api/v1/", token: "t", fetch, backoff: 0, ...options });
}

test("a 429 is waited out as Retry-After says, then retried with the same Idempotency-Key", async () => {
  const { fetch, seen } = scripted([limited("0"), limited("0")]);
  const result = await client(fetch).remember({ scope: "a:b:c", text: "My shell is zsh" });
  assert.deepEqual(result, { scope: "a:b:c" });
  assert.equal(seen.length, 3);
  assert.equal(new Set(seen.map((s) => s.key)).size, 1);
  assert.match(seen[0].key ?? "", /^[0-9a-f-]{36}$/);
  assert.equal(seen[0].url, "http://server.test/api/v1/memory/remember");
  assert.deepEqual(JSON.parse(seen[0].body ?? ""), { scope: "a:b:c", text: "My shell is zsh" });
});

test("after rateLimitRetries the 429 is thrown as RateLimited carrying retryAfter; waits are capped", async () => {
  const { fetch, seen } = scripted([limited("7"), limited("7"), limited("7")]);
  const started = Date.now();
  const error = await client(fetch, { rateLimitRetries: 1, maxRetryAfter: 0.02 })
    .whoami()
    .catch((caught: unknown) => caught);
  assert.ok(error instanceof RateLimited);
  assert.equal(error.retryAfter, 7);
  assert.equal(error.status, 429);
  assert.equal(error.code, "rate_limited");
  assert.equal(seen.length, 2);
  assert.equal(seen[0].key, null); // reads carry no key
  assert.ok(Date.now() - started < 2000);
});

test("zero rateLimitRetries throws at once; no Retry-After means retryAfter null", async () => {
  const { fetch, seen } = scripted([limited()]);
  const error = await client(fetch, { rateLimitRetries: 0 })
    .remember({ scope: "a:b:c", text: "x" })
    .catch((caught: unknown) => caught);
  assert.ok(error instanceof RateLimited);
  assert.equal(error.retryAfter, null);
  assert.equal(seen.length, 1);
});

test("503 and dropped connections are retried (writes keep their key), then typed errors", async () => {
  const unavailable: Answer = { status: 503, body: { error: "unavailable", field: null, detail: "later" } };
  const first = scripted([unavailable, "drop"]);
  await client(first.fetch).remember({ scope: "a:b:c", text: "x" });
  assert.equal(first.seen.length, 3);
  assert.equal(new Set(first.seen.map((s) => s.key)).size, 1);
  const failing = scripted([unavailable, unavailable, unavailable]);
  await assert.rejects(client(failing.fetch).whoami(), (e: unknown) => e instanceof ServerError && e.code === "unavailable");
  assert.equal(failing.seen.length, 3); // the call and its 2 retries
  const dropped = scripted(["drop", "drop"]);
  await assert.rejects(client(dropped.fetch, { retries: 1 }).whoami(), TransportError);
  assert.equal(dropped.seen.length, 2);
});

test("a 400 is not retried and carries code, field and detail", async () => {
  const { fetch, seen } = scripted([{ status: 400, body: { error: "invalid_field", field: "limit", detail: "too small" } }]);
  const error = await client(fetch).recall({ scope: "a:b:c", query: "q", limit: 0 }).catch((e: unknown) => e);
  assert.ok(error instanceof BadRequest);
  assert.deepEqual([error.code, error.field, error.detail, error.status], ["invalid_field", "limit", "too small", 400]);
  assert.equal(seen.length, 1);
});

test("query strings: arrays repeat, metadata goes as metadata.<key>=<JSON>, IDs are quoted", async () => {
  const { fetch, seen } = scripted([
    { status: 200, body: { items: [], next_cursor: null } },
    { status: 200, body: {} },
    { status: 200, body: { items: [], next_cursor: null } },
  ]);
  const mem = client(fetch);
  await mem.listRecords({ scope: "a:b:c", metadata: { customer_id: 42, tier: "gold" }, include_descendants: true });
  await mem.getRecord("../token?x=1");
  await mem.listTransactions({ state: ["committed", "aborted"] });
  const records = new URL(seen[0].url);
  assert.equal(records.searchParams.get("metadata.customer_id"), "42");
  assert.equal(records.searchParams.get("metadata.tier"), '"gold"');
  assert.equal(records.searchParams.get("include_descendants"), "true");
  assert.equal(seen[1].url, "http://server.test/api/v1/memory/records/..%2Ftoken%3Fx%3D1");
  assert.deepEqual(new URL(seen[2].url).searchParams.getAll("state"), ["committed", "aborted"]);
});

test("Retry-After reads seconds and HTTP dates; errors from non-JSON answers keep the text", () => {
  assert.equal(retryAfterSeconds("12"), 12);
  assert.equal(retryAfterSeconds(null), null);
  assert.equal(retryAfterSeconds("soon"), null);
  assert.equal(retryAfterSeconds("-1"), null);
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(retryAfterSeconds("Thu, 01 Jan 2026 00:00:30 GMT", now), 30);
  const error = errorFor(502, "<html>Bad gateway</html>");
  assert.ok(error instanceof ServerError);
  assert.equal(error.code, "http_error");
  assert.match(error.detail, /Bad gateway/);
});

test("the library uses no Node API (edge runtimes): dist imports nothing but itself and ai/zod", () => {
  const dist = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist");
  for (const name of readdirSync(dist).filter((file) => file.endsWith(".js"))) {
    const code = readFileSync(resolve(dist, name), "utf8");
    const statements = code.replace(/\/\/.*$/gm, "").replace(/\/\*[\s\S]*?\*\//g, "");
    const imports = [...statements.matchAll(/^\s*(?:import|export)\b[^;]*?from\s+"([^"]+)"/gm)].map((m) => m[1]);
    const foreign = imports.filter((spec) => !spec.startsWith("./") && !(name === "ai.js" && ["ai", "zod"].includes(spec)));
    assert.deepEqual(foreign, [], `${name} imports ${foreign.join(", ")}`);
    assert.doesNotMatch(statements, /\b(process|Buffer|require)\b|node:/, `${name} uses a Node API`);
  }
});

test("waitForSubjectExport polls until the job stops running, and gives up after its timeout", async () => {
  const job = (status: string) => ({ status: 200, body: { job_id: 7, status, done: 0, total: 3 } });
  const { fetch, seen } = scripted([job("running"), job("running"), job("done")]);
  const done = await client(fetch).waitForSubjectExport(7, { poll: 0.01, timeout: 5 });
  assert.equal(done.status, "done");
  assert.equal(seen.length, 3);
  assert.ok(seen.every((s) => s.method === "GET" && s.url === "http://server.test/api/v1/memory/subject-exports/7"));
  const running = scripted(Array.from({ length: 50 }, () => job("running")));
  const started = Date.now();
  const error = await client(running.fetch)
    .waitForSubjectExport(7, { poll: 0.02, timeout: 0.1 })
    .then(() => assert.fail("a job still running after the timeout must throw"), (caught: unknown) => caught);
  assert.ok(error instanceof WaitTimeout, String(error));
  assert.equal(error.last.status, "running");
  assert.ok(Date.now() - started < 2000);
  assert.ok(running.seen.length >= 2 && running.seen.length < 20);
});

test("record filters are spelled as the API reads them: metadata.<key>.$op=JSON, created_at.$op, filters=JSON", async () => {
  const { fetch, seen } = scripted([{ status: 200, body: { items: [], next_cursor: null } }, { status: 200, body: { items: [] } }]);
  const memory = client(fetch);
  await memory.listRecords({
    scope: "a:b:c",
    metadata: { customer_id: 42, tier: { $in: ["gold", "silver"] }, score: { $gte: 3 } },
    created_at: { $gte: "2026-01-01T00:00:00Z" },
  });
  const first = new URL(seen[0].url).searchParams;
  assert.equal(first.get("metadata.customer_id"), "42");
  assert.equal(first.get("metadata.tier.$in"), '["gold","silver"]');
  assert.equal(first.get("metadata.score.$gte"), "3");
  assert.equal(first.get("created_at.$gte"), "2026-01-01T00:00:00Z");
  await memory.listRecords({ scope: "a:b:c", filters: { metadata: { tier: { $ne: "gold" } } } });
  assert.equal(new URL(seen[1].url).searchParams.get("filters"), '{"metadata":{"tier":{"$ne":"gold"}}}');
});

test("a download resolves to the file's bytes; not ready is a Conflict, expired is Gone", async () => {
  const bytes = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0xff, 0x00, 0x80]);
  const answers = [
    new Response(bytes, { status: 200, headers: { "Content-Type": "application/zip" } }),
    Response.json({ error: "subject_export_not_ready", field: null, detail: "still running" }, { status: 409 }),
    Response.json({ error: "subject_export_expired", field: null, detail: "purged" }, { status: 410 }),
  ];
  const accepts: string[] = [];
  const fetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
    accepts.push(new Headers(init?.headers).get("Accept") ?? "");
    return answers.shift() as Response;
  }) as typeof globalThis.fetch;
  const memory = client(fetch);
  const zip = await memory.downloadSubjectExport(3);
  assert.ok(zip instanceof Uint8Array);
  assert.deepEqual([...zip], [...bytes]); // binary-safe: no text decoding on the way
  assert.match(accepts[0], /application\/zip/);
  await assert.rejects(memory.downloadSubjectExport(3), (e: unknown) => e instanceof Conflict && e.code === "subject_export_not_ready");
  await assert.rejects(memory.downloadSubjectExport(3), (e: unknown) => e instanceof Gone && e.code === "subject_export_expired");
});
