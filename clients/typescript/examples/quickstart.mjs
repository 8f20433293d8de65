import { AetnawebClient, BadRequest } from "@aetnaweb/client";

const memory = new AetnawebClient({ url: process.env.AETNAWEB_URL, token: process.env.AETNAWEB_TOKEN });
const scope = "acme:dana:quickstart";

const stored = await memory.remember({ scope, text: "My backup email is dana@example.org", session_id: "chat-1" });
console.log(stored.records[0].content); // User's backup email is dana@example.org.

// Recall sees this scope and its ancestors (acme:dana:*, acme:*:*, platform:*:*)
const found = await memory.recall({ scope, query: "what is my backup email?" });
console.log(found.candidates[0].content, found.candidates[0].score.toFixed(2));

// A block to paste into the model's prompt (empty when nothing is relevant)
console.log((await memory.recallBlock({ scope, query: "backup email" })).text);

// Every record, page after page (an async iterator over the cursor)
for await (const record of memory.iterRecords({ scope, status: "active" })) console.log(record.record_id);

// Forget: preview, then purge exactly what the preview showed; keep the receipt
const preview = await memory.forgetPreview({ scope, utterance: "forget my backup email" });
const receipt = await memory.forget({
  scope,
  utterance: "forget my backup email",
  expected_record_ids: preview.record_ids,
});
console.log(receipt.format, receipt.purged_record_ids);

// Refusals are typed errors carrying the server's code and the field at fault
try {
  await memory.remember({ scope: "acme:dana", text: "hi" });
} catch (refusal) {
  if (!(refusal instanceof BadRequest)) throw refusal;
  console.log(refusal.code, refusal.field); // invalid_scope scope
}
