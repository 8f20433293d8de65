// The Vercel AI SDK tools in a real generateText loop: a scripted model (the SDK's
// MockLanguageModelV3) calls remember, then recall, against the live server.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AetnawebClient } from "@aetnaweb/client";
import { memoryTools } from "@aetnaweb/client/ai";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

type ModelOptions = NonNullable<ConstructorParameters<typeof MockLanguageModelV3>[0]>;
type Step = Extract<NonNullable<ModelOptions["doGenerate"]>, unknown[]>[number];

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
} as Step["usage"];

function callTool(toolName: string, input: object): Step {
  return {
    content: [{ type: "tool-call", toolCallId: `call-${toolName}`, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

function say(text: string): Step {
  return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
}

function client(token: string) {
  return new AetnawebClient({ url: process.env.AETNAWEB_URL ?? "", token, retries: 0 });
}

test("an agent loop remembers a fact with the tool, then recalls it", async () => {
  const scope = `acme:alice:ai${Math.random().toString(36).slice(2, 10)}`;
  const tools = memoryTools(client(process.env.AETNAWEB_TOKEN ?? ""), { scope, sessionId: "chat-1" });
  const model = new MockLanguageModelV3({
    doGenerate: [
      callTool("remember", { text: "My favourite editor is helix" }),
      callTool("recall", { query: "favourite editor" }),
      say("You use helix."),
    ],
  });
  const result = await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: "Remember my editor." });
  assert.equal(result.text, "You use helix.");
  const outputs = result.steps.flatMap((step) => step.toolResults.map((r) => [r.toolName, r.output] as const));
  const remembered = outputs.find(([name]) => name === "remember")?.[1] as { stored: { record_id: string }[] };
  const recalled = outputs.find(([name]) => name === "recall")?.[1] as {
    memories: { record_id: string; content: string }[];
    abstained: boolean;
  };
  assert.equal(remembered.stored.length, 1);
  assert.equal(recalled.memories[0].record_id, remembered.stored[0].record_id);
  assert.match(recalled.memories[0].content, /helix/);
  // the model saw the tool schemas the SDK built from zod
  const offered = model.doGenerateCalls[0].tools?.map((t) => t.name).sort();
  assert.deepEqual(offered, ["forget", "forget_preview", "recall", "remember"]);
});

test("forget_preview then forget erase exactly the previewed records", async () => {
  const scope = `acme:alice:ai${Math.random().toString(36).slice(2, 10)}`;
  const mem = client(process.env.AETNAWEB_TOKEN ?? "");
  await mem.remember({ scope, text: "My backup email is alice@example.org" });
  const tools = memoryTools(mem, { scope });
  const options = { toolCallId: "t", messages: [] };
  const preview = (await tools.forget_preview.execute!({ selector: "backup email" }, options)) as {
    record_ids: string[];
  };
  assert.equal(preview.record_ids.length, 1);
  const receipt = (await tools.forget.execute!({ selector: "backup email", record_ids: preview.record_ids }, options)) as {
    purged_record_ids: string[];
  };
  assert.deepEqual(receipt.purged_record_ids, preview.record_ids);
  const recalled = (await tools.recall.execute!({ query: "backup email" }, options)) as { memories: unknown[] };
  assert.deepEqual(recalled.memories, []);
});

test("an API refusal comes back to the model as {error, field, detail}", async () => {
  const scope = "acme:alice:proj";
  const tools = memoryTools(client(process.env.AETNAWEB_READ_TOKEN ?? ""), { scope });
  const refused = await tools.remember.execute!({ text: "My shell is fish" }, { toolCallId: "t", messages: [] });
  assert.deepEqual(Object.keys(refused as object).sort(), ["detail", "error", "field"]);
  assert.equal((refused as { error: string }).error, "capability_missing");
});
