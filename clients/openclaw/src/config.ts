// The plugin's settings (plugins.entries.aetnaweb-memory.config in openclaw.json),
// checked once at registration. openclaw.plugin.json carries the same rules as a
// JSON Schema for the host; this is the plugin's own check, so a bad value is
// refused with its name instead of surfacing as a failed HTTP call later.

/** One exact aetnaweb scope: tenant:user:project (no wildcard: captures are written there). */
const SCOPE_PATTERN = /^[A-Za-z0-9._-]{1,64}:[A-Za-z0-9._-]{1,64}:[A-Za-z0-9._-]{1,64}$/;

/** The server's ceilings (memory/limits.py): at most 50 items, 100,000 characters per block. */
export const MAX_ITEMS = 50;
export const MAX_BLOCK_CHARS = 100_000;

export interface AetnawebMemoryConfig {
  /** The aetnaweb server, e.g. https://memory.example.org (a trailing /api/v1 is accepted). */
  url: string;
  /** A scoped API token (aetna_...) holding read, write and forget on `scope`. */
  token: string;
  /** The scope every turn is recalled from and captured to: tenant:user:project. */
  scope: string;
  /** Per OpenClaw agent id, a scope that replaces `scope` for that agent's turns. */
  agentScopes: Record<string, string>;
  /** Inject a <relevant_memories> block before each prompt. */
  autoRecall: boolean;
  /** Inject a <persona_memories> block (the scope's standing facts) before each prompt. */
  persona: boolean;
  /** Capture each turn after the run (the user's turn in full, the reply as a digest). */
  autoCapture: boolean;
  /** Most memories in the recall block. */
  maxMemories: number;
  /** Most characters of the recall block (tags included). */
  maxChars: number;
  /** Most characters of the persona lines. */
  personaMaxChars: number;
  /** Calibrated match confidence a memory needs to be injected; undefined: the server's default. */
  minConfidence: number | undefined;
  /** Most results of the search tool. */
  searchLimit: number;
  /** Budget of the whole recall (persona and block) before a prompt, in milliseconds. */
  recallTimeoutMs: number;
  /** Budget of one capture call, in milliseconds. */
  captureTimeoutMs: number;
  /** Budget of one tool call, in milliseconds. */
  toolTimeoutMs: number;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

const DEFAULTS = {
  autoRecall: true,
  persona: true,
  autoCapture: true,
  maxMemories: 5,
  maxChars: 2000,
  personaMaxChars: 1500,
  searchLimit: 5,
  recallTimeoutMs: 3000,
  captureTimeoutMs: 10_000,
  toolTimeoutMs: 15_000,
} as const;

const KNOWN = new Set([
  "url",
  "token",
  "scope",
  "agentScopes",
  "minConfidence",
  ...Object.keys(DEFAULTS),
]);

function text(raw: Record<string, unknown>, name: string): string {
  const value = raw[name];
  if (typeof value !== "string" || value.trim() === "") {
    throw new ConfigError(`aetnaweb-memory: config.${name} is required (a non-empty string)`);
  }
  return value.trim();
}

function scope(value: unknown, name: string): string {
  if (typeof value !== "string" || !SCOPE_PATTERN.test(value)) {
    throw new ConfigError(
      `aetnaweb-memory: config.${name} must be one exact scope tenant:user:project (got ${JSON.stringify(value)})`,
    );
  }
  return value;
}

function flag(raw: Record<string, unknown>, name: keyof typeof DEFAULTS): boolean {
  const value = raw[name] ?? DEFAULTS[name];
  if (typeof value !== "boolean") throw new ConfigError(`aetnaweb-memory: config.${name} must be true or false`);
  return value;
}

function integer(raw: Record<string, unknown>, name: keyof typeof DEFAULTS, min: number, max: number): number {
  const value = raw[name] ?? DEFAULTS[name];
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`aetnaweb-memory: config.${name} must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** The checked settings, defaults filled in; throws ConfigError naming the first bad field. */
export function parseConfig(input: unknown): AetnawebMemoryConfig {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new ConfigError("aetnaweb-memory: config must be an object with url, token and scope");
  }
  const raw = input as Record<string, unknown>;
  for (const name of Object.keys(raw)) {
    if (!KNOWN.has(name)) throw new ConfigError(`aetnaweb-memory: config.${name} is not a known setting`);
  }
  const url = text(raw, "url");
  if (!/^https?:\/\/[^/]/.test(url)) {
    throw new ConfigError("aetnaweb-memory: config.url must be an http:// or https:// URL");
  }
  const agentScopes: Record<string, string> = {};
  if (raw.agentScopes !== undefined) {
    if (typeof raw.agentScopes !== "object" || raw.agentScopes === null || Array.isArray(raw.agentScopes)) {
      throw new ConfigError("aetnaweb-memory: config.agentScopes must map agent ids to scopes");
    }
    for (const [agent, value] of Object.entries(raw.agentScopes)) {
      agentScopes[agent] = scope(value, `agentScopes.${agent}`);
    }
  }
  let minConfidence: number | undefined;
  if (raw.minConfidence !== undefined) {
    const value = raw.minConfidence;
    if (typeof value !== "number" || !(value >= 0 && value <= 1)) {
      throw new ConfigError("aetnaweb-memory: config.minConfidence must be a number from 0 to 1");
    }
    minConfidence = value;
  }
  return {
    url,
    token: text(raw, "token"),
    scope: scope(raw.scope, "scope"),
    agentScopes,
    autoRecall: flag(raw, "autoRecall"),
    persona: flag(raw, "persona"),
    autoCapture: flag(raw, "autoCapture"),
    maxMemories: integer(raw, "maxMemories", 1, MAX_ITEMS),
    maxChars: integer(raw, "maxChars", 1, MAX_BLOCK_CHARS),
    personaMaxChars: integer(raw, "personaMaxChars", 1, MAX_BLOCK_CHARS),
    minConfidence,
    searchLimit: integer(raw, "searchLimit", 1, MAX_ITEMS),
    recallTimeoutMs: integer(raw, "recallTimeoutMs", 1, 120_000),
    captureTimeoutMs: integer(raw, "captureTimeoutMs", 1, 120_000),
    toolTimeoutMs: integer(raw, "toolTimeoutMs", 1, 120_000),
  };
}
