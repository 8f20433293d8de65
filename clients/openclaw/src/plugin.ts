// The plugin's behaviour, host-independent: what each OpenClaw hook and tool does
// with an aetnaweb server. index.ts wires it into OpenClaw's plugin API, whose
// types (openclaw/plugin-sdk) check every signature here at compile time.
import { createHash } from "node:crypto";
import { AetnawebClient, ApiError, type Schemas } from "@aetnaweb/client";
import {
  RECALL_OPEN,
  messageRole,
  messageText,
  personaBlock,
  stripInjectedBlocks,
  stripMessage,
} from "./blocks.js";
import type { AetnawebMemoryConfig } from "./config.js";

/** The server's bound on a recall query (memory/limits.py). */
const MAX_QUERY_CHARS = 10_000;
/** The server's bound on a session or turn ID (aetnaweb/limits.py). */
const MAX_CONTEXT_CHARS = 200;
/** The server's bound on one captured message (memory/limits.py MAX_TEXT_CHARS). */
const MAX_CAPTURE_CHARS = 100_000;

export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  debug?(message: string): void;
}

/** What the plugin needs from a hook's context (a subset of OpenClaw's PluginHookAgentContext). */
export interface TurnContext {
  agentId?: string;
  sessionId?: string;
  sessionKey?: string;
  runId?: string;
  readonly hookInvocation?: Readonly<{ assertActive(): void }>;
}

export interface PromptBuildEvent {
  prompt: string;
  currentUserMessage?: string;
  messages: unknown[];
}

export interface AgentEndEvent {
  runId?: string;
  messages: unknown[];
  success: boolean;
}

/** What before_prompt_build injected: the block text and the record IDs in it. */
export interface Injection {
  scope: string;
  prependContext: string;
  personaIds: string[];
  recallIds: string[];
  /** The memory.persona_built and memory.context_injected audit event IDs. */
  auditEventIds: string[];
}

/** What agent_end captured: per role, the server's answer (or why nothing was sent). */
export interface Capture {
  scope: string;
  user?: Schemas["CaptureOut"];
  assistant?: Schemas["CaptureOut"];
}

export interface ForgetOutcome {
  scope: string;
  preview: Schemas["ForgetPreviewOut"];
  /** One deletion receipt (the plugin forgets at its own scope, never below). */
  receipt: Schemas["DeletionReceiptOut"] | null;
}

function digest(...parts: (string | undefined)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(`${part ?? ""}\u0000`);
  return hash.digest("hex");
}

function bounded(value: string | undefined): string | undefined {
  return value ? value.slice(0, MAX_CONTEXT_CHARS) : undefined;
}

/** A one-line reason for a log line: the error's class and code, never memory content. */
export function reason(error: unknown): string {
  if (error instanceof ApiError) return `${error.name} ${error.status} ${error.code ?? ""}`.trim();
  if (error instanceof Error) return `${error.name}: ${error.message}`.slice(0, 200);
  return String(error).slice(0, 200);
}

/** The memory plugin's work for one configured server, token and scope. */
export class AetnawebMemory {
  readonly config: AetnawebMemoryConfig;
  readonly #recallClient: AetnawebClient;
  readonly #writeClient: AetnawebClient;
  readonly #log: Logger;

  constructor(config: AetnawebMemoryConfig, log: Logger, fetchImpl?: typeof fetch) {
    this.config = config;
    this.#log = log;
    // Recall sits in front of a prompt: no retry, one budget for the whole of it.
    this.#recallClient = new AetnawebClient({
      url: config.url,
      token: config.token,
      retries: 0,
      rateLimitRetries: 0,
      timeout: config.recallTimeoutMs / 1000,
      fetch: fetchImpl,
    });
    // Writes and tools may retry (each write carries one Idempotency-Key for all attempts).
    this.#writeClient = new AetnawebClient({
      url: config.url,
      token: config.token,
      retries: 1,
      rateLimitRetries: 1,
      maxRetryAfter: 5,
      timeout: config.captureTimeoutMs / 1000,
      fetch: fetchImpl,
    });
  }

  /** The scope of an agent's turns: its own from agentScopes, else the configured one. */
  scopeFor(agentId?: string): string {
    return (agentId && this.config.agentScopes[agentId]) || this.config.scope;
  }

  /**
   * before_prompt_build: the persona block and the <relevant_memories> block for the
   * current message, as the server built (and audited) them; undefined when there is
   * nothing to inject. Never throws: a failure or timeout leaves the prompt as it was.
   */
  async beforePromptBuild(event: PromptBuildEvent, ctx: TurnContext): Promise<Injection | undefined> {
    const { config } = this;
    if (!config.autoRecall && !config.persona) return undefined;
    const scope = this.scopeFor(ctx.agentId);
    const query = stripInjectedBlocks(currentRequest(event)).slice(0, MAX_QUERY_CHARS).trim();
    const signal = AbortSignal.timeout(config.recallTimeoutMs);
    const [persona, block] = await Promise.allSettled([
      config.persona
        ? this.#recallClient.persona({ scope, max_chars: config.personaMaxChars }, { signal })
        : Promise.resolve(undefined),
      config.autoRecall && query
        ? this.#recallClient.recallBlock(
            {
              scope,
              query,
              max_items: config.maxMemories,
              max_chars: config.maxChars,
              session_id: bounded(ctx.sessionId),
              ...(config.minConfidence === undefined ? {} : { min_confidence: config.minConfidence }),
            },
            { signal },
          )
        : Promise.resolve(undefined),
    ]);
    const parts: string[] = [];
    const injection: Injection = { scope, prependContext: "", personaIds: [], recallIds: [], auditEventIds: [] };
    if (persona.status === "rejected") {
      this.#log.warn(`aetnaweb-memory: persona skipped (${reason(persona.reason)})`);
    } else if (persona.value && persona.value.text) {
      parts.push(personaBlock(persona.value.text));
      injection.personaIds = persona.value.record_ids;
      injection.auditEventIds.push(persona.value.audit_event_id);
    }
    if (block.status === "rejected") {
      this.#log.warn(`aetnaweb-memory: recall skipped (${reason(block.reason)})`);
    } else if (block.value && block.value.text.startsWith(RECALL_OPEN)) {
      parts.push(block.value.text); // verbatim: the audited block_sha256 is of this text
      injection.recallIds = block.value.record_ids;
      if (block.value.audit_event_id) injection.auditEventIds.push(block.value.audit_event_id);
    }
    if (!parts.length) return undefined;
    injection.prependContext = parts.join("\n\n");
    return injection;
  }

  /**
   * agent_end: the user's turn through the server's full write pipeline (stored,
   * facts extracted, audited) and the reply as an assistant turn, which the server
   * keeps only as a digest and a size: a reply never becomes a fact by itself.
   * Injected blocks are removed first. Never throws.
   */
  async agentEnd(event: AgentEndEvent, ctx: TurnContext): Promise<Capture | undefined> {
    if (!this.config.autoCapture) return undefined;
    const scope = this.scopeFor(ctx.agentId);
    const turn = lastTurn(event.messages);
    if (!turn) return undefined;
    const session = bounded(ctx.sessionId ?? ctx.sessionKey);
    const turnId = bounded(ctx.runId ?? event.runId);
    const result: Capture = { scope };
    for (const role of ["user", "assistant"] as const) {
      const content = turn[role];
      if (!content) continue;
      try {
        result[role] = await this.#writeClient.capture(
          { scope, role, content, session_id: session, turn_id: turnId },
          // The same turn captured twice (a replayed agent_end) is one write.
          { idempotencyKey: `openclaw-${digest(scope, session, turnId, role, content)}` },
        );
      } catch (error) {
        this.#log.warn(`aetnaweb-memory: ${role} turn not captured (${reason(error)})`);
      }
    }
    return result;
  }

  /**
   * before_message_write (synchronous): the message without injected blocks, null
   * to drop a message that held nothing else, undefined to keep it unchanged.
   */
  beforeMessageWrite<M>(message: M): M | null | undefined {
    const stripped = stripMessage(message);
    return stripped === message ? undefined : stripped;
  }

  /** The search tool: an audited recall; each line carries its record ID. */
  async search(query: string, limit: number | undefined, agentId?: string): Promise<Schemas["RecallOut"]> {
    const scope = this.scopeFor(agentId);
    return this.#writeClient.recall(
      {
        scope,
        query: query.slice(0, MAX_QUERY_CHARS),
        limit: Math.min(limit ?? this.config.searchLimit, 50),
        ...(this.config.minConfidence === undefined ? {} : { min_confidence: this.config.minConfidence }),
      },
      { signal: AbortSignal.timeout(this.config.toolTimeoutMs) },
    );
  }

  /**
   * The forget tool: a preview, then a forget of exactly what it listed (the server
   * refuses with 409 if the match changed in between), answering the deletion receipt.
   * ``previewOnly`` stops after the preview; nothing matched forgets nothing.
   */
  async forget(
    target: { query?: string; recordIds?: string[] },
    previewOnly: boolean,
    agentId?: string,
  ): Promise<ForgetOutcome> {
    const scope = this.scopeFor(agentId);
    const hasQuery = typeof target.query === "string" && target.query.trim() !== "";
    const hasIds = Array.isArray(target.recordIds) && target.recordIds.length > 0;
    if (hasQuery === hasIds) {
      throw new Error("give exactly one of query (words the memories contain) or record_ids");
    }
    const selection = hasQuery ? { selector: target.query!.trim() } : { record_ids: target.recordIds! };
    const signal = AbortSignal.timeout(this.config.toolTimeoutMs);
    let preview: Schemas["ForgetPreviewOut"];
    try {
      preview = await this.#writeClient.forgetPreview({ scope, ...selection }, { signal });
    } catch (error) {
      // "Nothing matched" is an answer, not a failure: nothing to forget.
      if (!(error instanceof ApiError && error.code === "nothing_matched")) throw error;
      preview = {
        scope,
        mode: "selector",
        record_ids: [],
        episode_ids: [],
        records: [],
        episodes: [],
        include_below: false,
        below: [],
        count: 0,
        confirm_above: 10,
      };
    }
    if (previewOnly || (!preview.record_ids.length && !preview.episode_ids.length)) {
      return { scope, preview, receipt: null };
    }
    // Without include_below the answer is one receipt, never a bundle.
    const receipt = (await this.#writeClient.forget(
      {
        scope,
        ...selection,
        expected_record_ids: preview.record_ids,
        expected_episode_ids: preview.episode_ids,
        // The preview was shown (and returned to the agent): its count confirms a large forget.
        confirm_count: preview.count,
      },
      { signal },
    )) as Schemas["DeletionReceiptOut"];
    return { scope, preview, receipt };
  }
}

/** The current request: the harness's explicit one, else the last user message, else the prompt. */
function currentRequest(event: PromptBuildEvent): string {
  if (typeof event.currentUserMessage === "string") return event.currentUserMessage;
  for (let i = event.messages.length - 1; i >= 0; i--) {
    const message = event.messages[i];
    if (messageRole(message) === "user" && !isContextCarrier(message)) return messageText(message);
  }
  return event.prompt;
}

function isContextCarrier(message: unknown): boolean {
  return (message as { runtimeContextCarrier?: unknown } | null)?.runtimeContextCarrier === true;
}

/** The last user turn of a run and the assistant text after it, injected blocks removed. */
export function lastTurn(messages: unknown[]): { user: string; assistant: string } | undefined {
  let index = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messageRole(messages[i]) === "user" && !isContextCarrier(messages[i])) {
      index = i;
      break;
    }
  }
  if (index < 0) return undefined;
  const user = stripInjectedBlocks(messageText(messages[index])).slice(0, MAX_CAPTURE_CHARS);
  const replies = messages
    .slice(index + 1)
    .filter((message) => messageRole(message) === "assistant")
    .map((message) => stripInjectedBlocks(messageText(message)))
    .filter(Boolean);
  const assistant = replies.join("\n\n").slice(0, MAX_CAPTURE_CHARS);
  if (!user && !assistant) return undefined;
  return { user, assistant };
}
