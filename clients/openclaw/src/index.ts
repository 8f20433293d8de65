// @aetnaweb/openclaw: the OpenClaw plugin entry. The definition is typed with
// OpenClaw's own plugin SDK types (openclaw/plugin-sdk/plugin-entry) and imports
// nothing from OpenClaw at run time, so the plugin needs only @aetnaweb/client
// and typebox.
import type {
  AnyAgentTool,
  OpenClawPluginApi,
  OpenClawPluginDefinition,
} from "openclaw/plugin-sdk/plugin-entry";
import { Type } from "typebox";
import { parseConfig } from "./config.js";
import { AetnawebMemory, reason } from "./plugin.js";

export { ConfigError, parseConfig, type AetnawebMemoryConfig } from "./config.js";
export {
  PERSONA_CLOSE,
  PERSONA_OPEN,
  RECALL_CLOSE,
  RECALL_OPEN,
  hasInjectedBlock,
  stripInjectedBlocks,
  stripMessage,
} from "./blocks.js";
export {
  AetnawebMemory,
  lastTurn,
  type Capture,
  type ForgetOutcome,
  type Injection,
  type Logger,
} from "./plugin.js";

export const PLUGIN_ID = "aetnaweb-memory";
export const SEARCH_TOOL = "aetnaweb_memory_search";
export const FORGET_TOOL = "aetnaweb_memory_forget";

const SearchParams = Type.Object({
  query: Type.String({ minLength: 1, description: "What to look for in memory." }),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, description: "Most results (default from config)." })),
});

const ForgetParams = Type.Object({
  query: Type.Optional(
    Type.String({ minLength: 1, description: "Forget the memories and messages containing these words." }),
  ),
  record_ids: Type.Optional(
    Type.Array(Type.String(), { minItems: 1, description: "Forget exactly these memories (IDs from search)." }),
  ),
  preview_only: Type.Optional(
    Type.Boolean({ description: "Only list what would be forgotten; forget nothing." }),
  ),
});

function text(value: string) {
  return [{ type: "text" as const, text: value }];
}

/** The two agent-callable tools, bound to one agent's scope. */
export function memoryTools(memory: AetnawebMemory, agentId?: string): AnyAgentTool[] {
  const search: AnyAgentTool = {
    name: SEARCH_TOOL,
    label: "Search memory",
    description:
      "Search the user's long-term memory (aetnaweb). Each result line is `- [record_id] content`; " +
      "pass record IDs to aetnaweb_memory_forget to forget exactly those.",
    parameters: SearchParams,
    async execute(_toolCallId, params, signal) {
      signal?.throwIfAborted();
      const { query, limit } = params as { query: string; limit?: number };
      const found = await memory.search(query, limit, agentId);
      const hits = found.candidates.filter((c) => found.returned_ids.includes(c.record_id));
      const lines = hits.map(
        (c) => `- [${c.record_id}] ${c.content} (confidence ${(c.confidence ?? c.score).toFixed(2)})`,
      );
      return {
        content: text(lines.length ? lines.join("\n") : "No memory matches."),
        details: {
          scope: found.scope,
          record_ids: hits.map((c) => c.record_id),
          abstained: found.abstained ?? !hits.length,
          audit_event_id: found.audit_event_id,
        },
      };
    },
  };
  const forget: AnyAgentTool = {
    name: FORGET_TOOL,
    label: "Forget memory",
    description:
      "Forget memories for good, when the user asks to: give `query` (words they contain) or `record_ids`. " +
      "Previews the match, purges exactly that and returns the deletion receipt " +
      "(`preview_only: true` lists the match and forgets nothing).",
    parameters: ForgetParams,
    async execute(_toolCallId, params, signal) {
      signal?.throwIfAborted();
      const { query, record_ids, preview_only } = params as {
        query?: string;
        record_ids?: string[];
        preview_only?: boolean;
      };
      const outcome = await memory.forget({ query, recordIds: record_ids }, preview_only === true, agentId);
      const { preview, receipt } = outcome;
      const listed = preview.records.map((r) => `- [${r.record_id}]`).join("\n");
      let summary: string;
      if (receipt) {
        summary =
          `Forgot ${receipt.purged_record_ids.length} memories and ${receipt.purged_episode_ids.length} ` +
          `stored messages. Deletion receipt ${receipt.receipt_sha256} (audit event ${receipt.audit_event_id}).` +
          (listed ? `\n${listed}` : "");
      } else if (preview.record_ids.length || preview.episode_ids.length) {
        summary =
          `Would forget ${preview.record_ids.length} memories and ${preview.episode_ids.length} stored messages ` +
          `(nothing forgotten yet).` +
          (listed ? `\n${listed}` : "");
      } else {
        summary = "Nothing matched: nothing was forgotten.";
      }
      return { content: text(summary), details: outcome };
    },
  };
  return [search, forget];
}

/** Wire the plugin into OpenClaw: three hooks and two tools. */
export function register(api: OpenClawPluginApi): void {
  let memory: AetnawebMemory;
  try {
    memory = new AetnawebMemory(parseConfig(api.pluginConfig ?? {}), api.logger);
  } catch (error) {
    api.logger.error(reason(error));
    return; // a misconfigured plugin registers nothing rather than failing the gateway
  }

  api.on("before_prompt_build", async (event, ctx) => {
    const injection = await memory.beforePromptBuild(event, ctx);
    if (!injection) return undefined;
    try {
      ctx.hookInvocation?.assertActive();
    } catch {
      return undefined; // the host stopped waiting: the result would be dropped anyway
    }
    return { prependContext: injection.prependContext };
  });

  api.on("agent_end", async (event, ctx) => {
    await memory.agentEnd(event, ctx);
  });

  api.on("before_message_write", (event) => {
    const stripped = memory.beforeMessageWrite(event.message);
    if (stripped === undefined) return undefined;
    return stripped === null ? { block: true } : { message: stripped };
  });

  api.registerTool((ctx) => memoryTools(memory, ctx.agentId), { names: [SEARCH_TOOL, FORGET_TOOL] });
}

const plugin = {
  id: PLUGIN_ID,
  name: "aetnaweb memory",
  description:
    "Long-term memory on an aetnaweb server: bounded, audited recall before each prompt, " +
    "capture after each turn, search and forget with deletion receipts.",
  // The host's config check runs the plugin's own (the manifest holds the same rules as JSON Schema).
  configSchema: {
    validate(value: unknown): { ok: true } | { ok: false; errors: string[] } {
      try {
        parseConfig(value);
        return { ok: true };
      } catch (error) {
        return { ok: false, errors: [error instanceof Error ? error.message : String(error)] };
      }
    },
  },
  register,
} satisfies OpenClawPluginDefinition;

export default plugin;
