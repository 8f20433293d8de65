// Memory tools for the Vercel AI SDK (``ai`` 5 or later, with ``zod``):
//
//   import { memoryTools } from "@aetnaweb/client/ai";
//   const result = await generateText({ model, tools: memoryTools(client, { scope }), ... });
//
// The scope is fixed by the application, never chosen by the model, so a prompt
// injection cannot steer writes into another scope; ``forget`` purges only the
// record IDs a preview showed (the model must call ``forget_preview`` first). An API
// refusal comes back to the model as {error, field, detail} so it can correct itself.
import { tool } from "ai";
import { z } from "zod";
import type { AetnawebClient } from "./client.js";
import { ApiError } from "./errors.js";

export interface MemoryToolsOptions {
  /** The exact scope the tools read and write (``tenant:user:project``). */
  scope: string;
  /** Groups what is remembered and recalled into one conversation. */
  sessionId?: string;
}

type Refusal = { error: string; field: string | null; detail: string };

async function answer<T>(run: () => Promise<T>): Promise<T | Refusal> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ApiError) return { error: error.code, field: error.field, detail: error.detail };
    throw error;
  }
}

/** The ``remember``, ``recall``, ``forget_preview`` and ``forget`` tools, bound to ``client`` and ``scope``. */
export function memoryTools(client: AetnawebClient, options: MemoryToolsOptions) {
  const { scope, sessionId } = options;
  return {
    remember: tool({
      description: "Remember something the user said about themselves or their work, in their words.",
      inputSchema: z.object({
        text: z.string().min(1).describe('The user\'s statement, e.g. "My backup email is alice@example.org".'),
      }),
      execute: ({ text }) =>
        answer(async () => {
          const result = await client.remember({ scope, text, session_id: sessionId });
          return {
            stored: result.records.map((r) => ({ record_id: r.record_id, content: r.content, status: r.status })),
            duplicate_of: result.duplicate_of,
            ignored: result.ignored,
          };
        }),
    }),
    recall: tool({
      description: "Recall the most relevant memories about the user for a question.",
      inputSchema: z.object({
        query: z.string().min(1).describe('What you want to know, e.g. "backup email".'),
        limit: z.number().int().min(1).max(50).optional().describe("How many memories at most (default 5)."),
      }),
      execute: ({ query, limit }) =>
        answer(async () => {
          const found = await client.recall({ scope, query, limit: limit ?? 5, session_id: sessionId });
          return {
            memories: found.candidates
              .filter((c) => c.returned)
              .map((c) => ({ record_id: c.record_id, content: c.content, score: c.score, confidence: c.confidence })),
            // "No memory fits" is an answer, not an empty list that looks like an error.
            abstained: found.abstained,
            abstain_reason: found.abstain_reason,
          };
        }),
    }),
    forget_preview: tool({
      description: "Show what forgetting would erase, without erasing anything. Call before forget.",
      inputSchema: z.object({
        selector: z.string().min(1).describe('Words the memories to forget contain, e.g. "backup email".'),
      }),
      execute: ({ selector }) =>
        answer(async () => {
          const preview = await client.forgetPreview({ scope, selector });
          return {
            record_ids: preview.record_ids,
            records: preview.records.map((r) => ({ record_id: r.record_id, content: r.content })),
          };
        }),
    }),
    forget: tool({
      description: "Erase memories the user asked to forget: exactly the record_ids forget_preview showed.",
      inputSchema: z.object({
        selector: z.string().min(1).describe("The same words given to forget_preview."),
        record_ids: z.array(z.string()).describe("The record_ids forget_preview returned."),
      }),
      execute: ({ selector, record_ids }) =>
        answer(async () => {
          const receipt = await client.forget({ scope, selector, expected_record_ids: record_ids });
          return { purged_record_ids: receipt.purged_record_ids, receipt_sha256: receipt.receipt_sha256 };
        }),
    }),
  };
}
