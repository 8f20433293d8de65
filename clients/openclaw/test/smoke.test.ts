// The plugin against a live aetnaweb server, driven the way OpenClaw drives it:
// register() on an API object recording what the plugin registers, then each hook
// and tool called with OpenClaw-shaped events. tests/client/test_openclaw_plugin.py
// starts the server and sets AETNAWEB_URL, AETNAWEB_TOKEN, AETNAWEB_PYTHON and
// AETNAWEB_REPO; AETNAWEB_OPENCLAW_TRANSCRIPT=<file> also writes a session transcript.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { AetnawebClient } from "@aetnaweb/client";
import type { AnyAgentTool, OpenClawPluginApi } from "openclaw/plugin-sdk/plugin-entry";
import plugin, {
  FORGET_TOOL,
  PERSONA_OPEN,
  PLUGIN_ID,
  RECALL_CLOSE,
  RECALL_OPEN,
  SEARCH_TOOL,
} from "../src/index.js";

const URL_ = required("AETNAWEB_URL");
const TOKEN = required("AETNAWEB_TOKEN");
const run = promisify(execFile);

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: this test runs against a live server`);
  return value;
}

type Handler = (event: unknown, ctx: unknown) => unknown;
type ToolFactory = (ctx: { agentId?: string; sessionId?: string }) => AnyAgentTool[];

/** An OpenClaw plugin API that records registrations and log lines. */
function host(config: Record<string, unknown>) {
  const hooks = new Map<string, Handler>();
  const factories: { factory: ToolFactory; names: string[] }[] = [];
  const logs: string[] = [];
  const api = {
    id: PLUGIN_ID,
    name: "aetnaweb memory",
    source: "test",
    registrationMode: "full",
    pluginConfig: config,
    logger: {
      info: (m: string) => logs.push(`info ${m}`),
      warn: (m: string) => logs.push(`warn ${m}`),
      error: (m: string) => logs.push(`error ${m}`),
      debug: (m: string) => logs.push(`debug ${m}`),
    },
    on(name: string, handler: Handler) {
      hooks.set(name, handler);
    },
    registerTool(factory: ToolFactory, opts?: { names?: string[] }) {
      factories.push({ factory, names: opts?.names ?? [] });
    },
  };
  plugin.register(api as unknown as OpenClawPluginApi);
  const hook = (name: string) => {
    const handler = hooks.get(name);
    assert.ok(handler, `${name} is registered`);
    return handler;
  };
  const tool = (name: string, agentId = "main") => {
    for (const { factory } of factories) {
      const found = factory({ agentId, sessionId: "s1" }).find((t) => t.name === name);
      if (found) return found;
    }
    throw new Error(`${name} is not registered`);
  };
  return { hooks, factories, logs, hook, tool };
}

const ctx = (runId: string) => ({ agentId: "main", sessionId: "oc-session-1", sessionKey: "agent:main:s1", runId });
const user = (text: string) => ({ role: "user", content: text, timestamp: Date.now() });
const assistant = (text: string) => ({
  role: "assistant",
  content: [{ type: "text", text }],
  api: "openai-responses",
  provider: "test",
  model: "test",
  usage: {},
  stopReason: "stop",
  timestamp: Date.now(),
});

/** Audit rows of the token's chains, payloads parsed. */
async function auditRows(observer: AetnawebClient): Promise<Record<string, unknown>[]> {
  const text = (await observer.exportAudit({})) as unknown as string;
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const row = JSON.parse(line) as Record<string, unknown>;
      if (typeof row.payload === "string") row.payload = JSON.parse(row.payload);
      return row;
    });
}

const scope = `acme:alice:oc${Math.random().toString(36).slice(2, 10)}`;
const observer = new AetnawebClient({ url: URL_, token: TOKEN, retries: 0 });
const transcript: string[] = [];
const config = { url: URL_, token: TOKEN, scope, maxMemories: 3, maxChars: 600, personaMaxChars: 400 };
const openclaw = host(config);
let emailRecordId = "";
let injected = "";

test("register: three hooks and two tools, named in the manifest", async () => {
  assert.deepEqual([...openclaw.hooks.keys()].sort(), ["agent_end", "before_message_write", "before_prompt_build"]);
  assert.deepEqual(openclaw.factories[0].names, [SEARCH_TOOL, FORGET_TOOL]);
  const { readFile } = await import("node:fs/promises");
  const manifest = JSON.parse(await readFile(new URL("../../openclaw.plugin.json", import.meta.url), "utf8"));
  assert.equal(manifest.id, PLUGIN_ID);
  assert.deepEqual(manifest.contracts.tools, [SEARCH_TOOL, FORGET_TOOL]);
  assert.deepEqual(manifest.configSchema.required, ["url", "token", "scope"]);
  assert.deepEqual(openclaw.logs, []);
});

test("a bad config registers nothing and says which setting is wrong", () => {
  const bad = host({ url: URL_, token: TOKEN, scope: "acme:alice:*" });
  assert.equal(bad.hooks.size, 0);
  assert.equal(bad.factories.length, 0);
  assert.match(bad.logs[0], /^error .*config\.scope must be one exact scope/);
  assert.match(host({ url: URL_, token: TOKEN, scope, maxMemories: 0 }).logs[0], /config\.maxMemories/);
  assert.match(host({ url: URL_, token: TOKEN, scope, colour: "red" }).logs[0], /config\.colour is not a known/);
  assert.deepEqual(plugin.configSchema.validate({ url: URL_, token: TOKEN, scope }), { ok: true });
  assert.deepEqual(plugin.configSchema.validate({ url: "ftp://x", token: TOKEN, scope }), {
    ok: false,
    errors: ["aetnaweb-memory: config.url must be an http:// or https:// URL"],
  });
});

test("agent_end: the user's turn is remembered, the reply leaves only a digest", async () => {
  await observer.remember({ scope, key: "preferred name", value: "Ally" });
  const said = "My backup email is alice@example.org";
  const reply = "Noted. Your backup email is alice@example.org and you like terse answers.";
  await openclaw.hook("agent_end")({ messages: [user(said), assistant(reply)], success: true }, ctx("run-1"));
  const records = (await observer.listRecords({ scope })).items;
  const email = records.find((r) => r.content.includes("alice@example.org"));
  assert.ok(email, "the user's fact was stored");
  emailRecordId = email.record_id;
  // The reply's own claim ("you like terse answers") is no record: a reply is never a fact by itself.
  assert.ok(!records.some((r) => r.content.includes("terse")), JSON.stringify(records));
  const rows = await auditRows(observer);
  const replyEvent = rows.find((r) => r.event_type === "agent.assistant_message" && r.subject_id === scope);
  assert.ok(replyEvent, "the reply was audited as an assistant turn");
  assert.equal((replyEvent.payload as { chars: number }).chars, reply.length);
  assert.ok(!JSON.stringify(replyEvent).includes("terse"), "the audit holds a digest, not the reply");
  // Captured twice (a replayed agent_end), the turn is one write.
  await openclaw.hook("agent_end")({ messages: [user(said), assistant(reply)], success: true }, ctx("run-1"));
  assert.equal((await observer.listRecords({ scope })).items.length, records.length);
  transcript.push(
    "## Turn 1: captured",
    "",
    `- user (stored, facts extracted): ${JSON.stringify(said)}`,
    `- assistant (digest and size only, ${reply.length} characters): ${JSON.stringify(reply)}`,
    `- records now in \`${scope}\`: ${records.map((r) => `\`${r.record_id}\` ${JSON.stringify(r.content)}`).join(", ")}`,
    "",
  );
});

test("before_prompt_build: bounded persona and recall blocks, every line an audited record ID", async () => {
  const question = "what is my backup email?";
  const result = (await openclaw.hook("before_prompt_build")(
    { prompt: question, currentUserMessage: question, messages: [user(question)] },
    ctx("run-2"),
  )) as { prependContext: string };
  injected = result.prependContext;
  assert.ok(injected.startsWith(PERSONA_OPEN), injected);
  const recall = injected.slice(injected.indexOf(RECALL_OPEN));
  assert.ok(recall.endsWith(RECALL_CLOSE), injected);
  assert.ok(recall.length <= config.maxChars);
  const recallIds = [...recall.matchAll(/^- \[([^\]]+)\] /gm)].map((m) => m[1]);
  assert.ok(recallIds.length >= 1 && recallIds.length <= config.maxMemories, recall);
  assert.ok(recallIds.includes(emailRecordId), recall);
  for (const line of injected.split("\n").filter((l) => l.startsWith("-"))) {
    assert.match(line, /^- \[[^\]]+\] \S/, "every memory line carries its record ID");
  }
  const personaIds = [...injected.slice(0, injected.indexOf(RECALL_OPEN)).matchAll(/^- \[([^\]]+)\] /gm)].map(
    (m) => m[1],
  );
  // The server audited exactly the IDs that entered the context.
  const rows = await auditRows(observer);
  const injectedEvent = rows.filter((r) => r.event_type === "memory.context_injected" && r.subject_id === scope).at(-1);
  assert.ok(injectedEvent, "memory.context_injected was audited");
  assert.deepEqual((injectedEvent.payload as { record_ids: string[] }).record_ids, recallIds);
  assert.equal((injectedEvent.payload as { chars: number }).chars, recall.length);
  const personaEvent = rows.filter((r) => r.event_type === "memory.persona_built" && r.subject_id === scope).at(-1);
  assert.ok(personaEvent, "memory.persona_built was audited");
  assert.deepEqual((personaEvent.payload as { record_ids: string[] }).record_ids, personaIds);
  transcript.push(
    "## Turn 2: injected before the prompt",
    "",
    `User: ${JSON.stringify(question)}. The plugin prepended:`,
    "",
    "```text",
    injected,
    "```",
    "",
    `Audited: \`memory.context_injected\` names ${JSON.stringify(recallIds)}; ` +
      `\`memory.persona_built\` names ${JSON.stringify(personaIds)}.`,
    "",
  );
});

test("before_prompt_build: below the confidence threshold nothing is recalled", async () => {
  const question = "recommend a lecture schedule on quantum chromodynamics";
  const result = (await openclaw.hook("before_prompt_build")(
    { prompt: question, currentUserMessage: question, messages: [user(question)] },
    ctx("run-3"),
  )) as { prependContext: string } | undefined;
  assert.ok(!result?.prependContext.includes(RECALL_OPEN), result?.prependContext);
});

test("before_message_write: injected blocks never reach the stored history", () => {
  const write = openclaw.hook("before_message_write");
  const question = "what is my backup email?";
  const stripped = write({ message: user(`${injected}\n\n${question}`) }, {}) as { message: { content: string } };
  assert.equal(stripped.message.content, question);
  const parts = write(
    { message: { ...user(""), content: [{ type: "text", text: injected }, { type: "text", text: question }] } },
    {},
  ) as { message: { content: { text: string }[] } };
  assert.deepEqual(
    parts.message.content.map((p) => p.text),
    [question],
  );
  assert.deepEqual(write({ message: user(injected) }, {}), { block: true });
  assert.equal(write({ message: user(question) }, {}), undefined, "an ordinary message is left alone");
  transcript.push(
    "## Transcript write: stripped",
    "",
    `The stored user message is ${JSON.stringify(stripped.message.content)}: the injected blocks were removed.`,
    "",
  );
});

test("agent_end: an injected block is never captured back into memory", async () => {
  const before = (await observer.listRecords({ scope })).items;
  const question = "what is my backup email?";
  const reply = `From memory: ${injected}`;
  await openclaw.hook("agent_end")(
    { messages: [user(`${injected}\n\n${question}`), assistant(reply)], success: true },
    ctx("run-2"),
  );
  const after = (await observer.listRecords({ scope })).items;
  assert.deepEqual(
    after.map((r) => r.record_id).sort(),
    before.map((r) => r.record_id).sort(),
    "no record was created from the recalled memories",
  );
  const scenes = (await observer.scenes({ scope })).scenes;
  const texts = scenes.flatMap((s) => s.episodes.map((e) => String(e.text ?? e.content ?? "")));
  assert.ok(texts.includes(question), JSON.stringify(texts));
  assert.ok(!texts.some((t) => t.includes("relevant_memories") || t.includes("persona_memories")), JSON.stringify(texts));
  transcript.push(
    "## Turn 2: captured",
    "",
    `- user: stored as ${JSON.stringify(question)} (the injected blocks stripped; no new record)`,
    "- assistant: a digest of the reply that quoted the memories; no record",
    "",
  );
});

test("search tool: an audited recall, one line per memory with its record ID", async () => {
  const out = await openclaw.tool(SEARCH_TOOL).execute("call-1", { query: "backup email" });
  const textOut = (out.content[0] as { text: string }).text;
  assert.match(textOut, new RegExp(`^- \\[${emailRecordId}\\] .*alice@example\\.org`, "m"));
  const details = out.details as { record_ids: string[]; audit_event_id: string };
  assert.ok(details.record_ids.includes(emailRecordId));
  assert.match(details.audit_event_id, /.+/);
  transcript.push("## Tool: aetnaweb_memory_search(\"backup email\")", "", "```text", textOut, "```", "");
});

test("forget tool: preview only forgets nothing; forget purges and returns a receipt verify_audit.py accepts", async () => {
  const forget = openclaw.tool(FORGET_TOOL);
  const preview = await forget.execute("call-2", { query: "backup email", preview_only: true });
  assert.match((preview.content[0] as { text: string }).text, /^Would forget 1 memories/);
  assert.equal((await observer.getRecord(emailRecordId)) !== undefined, true, "still there after a preview");

  const done = await forget.execute("call-3", { query: "backup email" });
  const summary = (done.content[0] as { text: string }).text;
  const { receipt, preview: listed } = done.details as {
    receipt: { format: string; purged_record_ids: string[]; purged_episode_ids: string[]; receipt_sha256: string };
    preview: { record_ids: string[]; episode_ids: string[] };
  };
  assert.equal(receipt.format, "aetnamem-deletion-receipt-v1");
  assert.deepEqual(receipt.purged_record_ids, listed.record_ids);
  assert.ok(receipt.purged_record_ids.includes(emailRecordId));
  assert.deepEqual(receipt.purged_episode_ids, listed.episode_ids);
  assert.ok(summary.includes(receipt.receipt_sha256));
  // Purged: gone from the records, from search, and from the next prompt.
  const left = (await observer.listRecords({ scope })).items;
  assert.ok(!left.some((r) => r.record_id === emailRecordId && r.status === "active"), JSON.stringify(left));
  assert.ok(!left.some((r) => r.content.includes("alice@example.org")), "the content is purged");
  const again = await openclaw.tool(SEARCH_TOOL).execute("call-4", { query: "backup email" });
  assert.ok(!(again.details as { record_ids: string[] }).record_ids.includes(emailRecordId));
  const next = (await openclaw.hook("before_prompt_build")(
    { prompt: "what is my backup email?", currentUserMessage: "what is my backup email?", messages: [] },
    ctx("run-5"),
  )) as { prependContext: string } | undefined;
  assert.ok(!next?.prependContext.includes("alice@example.org"), next?.prependContext);

  // The receipt holds against the server's own audit export, checked by the independent verifier.
  const dir = mkdtempSync(join(tmpdir(), "openclaw-receipt-"));
  writeFileSync(join(dir, "receipt.json"), JSON.stringify(receipt));
  writeFileSync(join(dir, "audit.jsonl"), (await observer.exportAudit({})) as unknown as string);
  const python = required("AETNAWEB_PYTHON");
  const verifier = join(required("AETNAWEB_REPO"), "tools", "verify_audit.py");
  const verified = await run(python, [
    verifier,
    "--export",
    join(dir, "audit.jsonl"),
    "--receipt",
    join(dir, "receipt.json"),
  ]);
  assert.match(verified.stdout, /^OK .*receipt/m, verified.stdout);
  assert.doesNotMatch(verified.stdout, /FAIL/);

  const nothing = await forget.execute("call-5", { query: "zebra passport" });
  assert.equal((nothing.content[0] as { text: string }).text, "Nothing matched: nothing was forgotten.");
  await assert.rejects(forget.execute("call-6", {}), /exactly one of query/);
  transcript.push(
    "## Tool: aetnaweb_memory_forget(\"backup email\")",
    "",
    "```text",
    summary,
    "```",
    "",
    `\`tools/verify_audit.py --export audit.jsonl --receipt receipt.json\`:`,
    "",
    "```text",
    verified.stdout.trim().split("\n").filter((l) => /receipt/i.test(l)).join("\n").replaceAll(dir, "."),
    "```",
    "",
    "The next prompt for \"what is my backup email?\" injects no email.",
    "",
  );
});

test("recall failures and timeouts never block a turn", async () => {
  // A server that accepts connections and never answers, and a port nobody listens on.
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const port = (silent.address() as { port: number }).port;
  try {
    for (const url of [`http://127.0.0.1:${port}`, "http://127.0.0.1:9"]) {
      const broken = host({ url, token: TOKEN, scope, recallTimeoutMs: 300, captureTimeoutMs: 300 });
      const started = Date.now();
      const result = await broken.hook("before_prompt_build")(
        { prompt: "hello", currentUserMessage: "hello", messages: [] },
        ctx("run-x"),
      );
      assert.equal(result, undefined, "the prompt goes on without memories");
      await broken.hook("agent_end")({ messages: [user("My car is blue"), assistant("ok")], success: true }, ctx("run-x"));
      assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
      assert.ok(broken.logs.some((l) => l.startsWith("warn aetnaweb-memory: recall skipped")), broken.logs.join("\n"));
      assert.ok(broken.logs.some((l) => l.startsWith("warn aetnaweb-memory: user turn not captured")));
      assert.ok(!broken.logs.some((l) => l.includes("blue") || l.includes(TOKEN)), "logs hold no content or token");
    }
  } finally {
    silent.closeAllConnections();
    silent.close();
  }
  // A refused token is a failure too: the turn still goes on.
  const refused = host({ url: URL_, token: "aetna_not-a-token", scope });
  assert.equal(
    await refused.hook("before_prompt_build")({ prompt: "hi", currentUserMessage: "hi", messages: [] }, ctx("r")),
    undefined,
  );
  assert.ok(refused.logs.some((l) => /recall skipped \(Unauthorized 401/.test(l)), refused.logs.join("\n"));
});

test("transcript", () => {
  const target = process.env.AETNAWEB_OPENCLAW_TRANSCRIPT;
  assert.ok(transcript.length > 10);
  if (!target) return;
  writeFileSync(
    target,
    [
      "# A plugin session (from the smoke test)",
      "",
      "Written by `clients/openclaw/test/smoke.test.ts` against a live aetnaweb server",
      "(`AETNAWEB_OPENCLAW_TRANSCRIPT=docs/transcript.md`; record IDs differ per run).",
      "",
      ...transcript,
    ].join("\n"),
  );
});
