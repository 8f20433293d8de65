// A typed client for every operation of the aetnaweb API, over the platform's fetch
// (Node 20+, Deno, Bun, browsers, edge runtimes): no Node API, no dependency.
//
// Every write (POST/PUT/PATCH/DELETE) carries an Idempotency-Key, one per call and
// the same on each of its attempts, so a retried write is answered from the first
// answer instead of storing twice. Connection failures, timeouts and 502/503/504
// are retried ``retries`` times with exponential backoff; a 429 is waited out as
// its Retry-After says (each wait capped at ``maxRetryAfter`` seconds) at most
// ``rateLimitRetries`` times, then RateLimited is thrown.
import { AetnawebError, RateLimited, TransportError, errorFor, retryAfterSeconds } from "./errors.js";
import type { components, operations } from "./generated.js";
import { OPERATIONS } from "./operations.js";

export type Schemas = components["schemas"];
/** Every operation of the API, by its OpenAPI operationId. */
export type OperationId = keyof operations & keyof typeof OPERATIONS;

type Params<K extends OperationId> = operations[K]["parameters"];
type JsonOf<R> = R extends { content: { "application/json": infer B } }
  ? B
  : R extends { content: { "application/jsonl": infer T } }
    ? T
    : never;
type SuccessStatus = 200 | 201 | 202 | 204;

/** The JSON body an operation takes (``never`` when it takes none). */
export type RequestBody<K extends OperationId> = operations[K] extends { requestBody: infer R }
  ? JsonOf<R>
  : never;
/** The query parameters an operation takes. */
export type Query<K extends OperationId> = NonNullable<Params<K>["query"]>;
/** The path parameters an operation takes. */
export type PathParams<K extends OperationId> = NonNullable<Params<K>["path"]>;
/** What an operation answers on success (parsed JSON; text for JSON Lines answers; bytes for a file). */
export type ResponseOf<K extends OperationId> = (typeof OPERATIONS)[K]["response"] extends "binary"
  ? Uint8Array
  : {
      [S in keyof operations[K]["responses"] & SuccessStatus]: JsonOf<operations[K]["responses"][S]>;
    }[keyof operations[K]["responses"] & SuccessStatus];

type IfAny<T, Then> = [T] extends [never] ? object : Then;
/** The arguments of ``client.call(operationId, args)``: path, query and body, as the operation needs. */
export type CallArgs<K extends OperationId> = IfAny<PathParams<K>, { path: PathParams<K> }> &
  IfAny<Query<K>, undefined extends Params<K>["query"] ? { query?: QueryArgs<K> } : { query: QueryArgs<K> }> &
  IfAny<RequestBody<K>, { body: RequestBody<K> }>;

/** A JSON value as a metadata filter takes it: its type is part of the match (42 is not "42"). */
export type MetadataValue = string | number | boolean | null;
/** The filter object recall takes in its body: ``{ metadata: {...}, created_at: {...} }``. */
export type RecordFilter = Schemas["MetadataFilterIn"];
/**
 * One metadata key's condition: a typed value (equality), or operators ANDed:
 * ``{ $in: ["gold", "silver"] }``, ``{ $gte: 3, $lt: 10 }``, ``{ $ne: "spam" }``.
 */
export type MetadataCondition = NonNullable<RecordFilter["metadata"]>[string];
/** A storage-time range: ``{ $gte: "2026-01-01T00:00:00Z", $lt: "2026-02-01" }``. */
export type CreatedAtRange = NonNullable<RecordFilter["created_at"]>;
type FilterQuery<K extends OperationId> = { metadata?: Record<string, MetadataCondition> } & ("created_at" extends keyof Query<K>
  ? { created_at?: CreatedAtRange }
  : object) &
  ("filters" extends keyof Query<K> ? { filters?: RecordFilter | string | null } : object);
/**
 * Query parameters, plus the record filters: ``metadata`` (sent as
 * ``metadata.<key>=<JSON>`` and ``metadata.<key>.$op=<JSON>``), ``created_at`` (sent as
 * ``created_at.$op=<ISO 8601>``) and, where the operation takes it, ``filters`` (the
 * object recall takes, sent as JSON text; not together with the other two).
 */
export type QueryArgs<K extends OperationId> = [Query<K>] extends [never]
  ? never
  : Omit<Query<K>, "metadata" | "created_at" | "filters"> & FilterQuery<K>;

export interface ClientOptions {
  /** The server, e.g. ``http://127.0.0.1:8000`` (a trailing ``/api/v1`` is accepted). */
  url: string;
  /** A bearer token (``aetna_...``), from the dashboard or ``manage.py access token create``. */
  token: string;
  /** Retries after a connection failure, a timeout or 502/503/504 (default 2). */
  retries?: number;
  /** First backoff between those retries, in seconds, doubled each time (default 0.2). */
  backoff?: number;
  /** Retries after a 429, each after the server's Retry-After (default 2). */
  rateLimitRetries?: number;
  /** The longest wait for one Retry-After, in seconds (default 60). */
  maxRetryAfter?: number;
  /** Per-attempt timeout in seconds (default 30). */
  timeout?: number;
  /** A fetch to use instead of the global one (a proxy, a test double, a framework's fetch). */
  fetch?: typeof fetch;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
}

/** How ``waitForSubjectExport`` polls. */
export interface WaitOptions {
  /** Seconds between two status requests (default 1). */
  poll?: number;
  /** Give up (``WaitTimeout``) after this many seconds (default 600). */
  timeout?: number;
  /** Abort the wait. */
  signal?: AbortSignal;
}

/** A job was still running when the wait's ``timeout`` ran out; ``last`` is its last status. */
export class WaitTimeout<T = ResponseOf<"subject_export">> extends AetnawebError {
  override name = "WaitTimeout";
  readonly last: T;
  constructor(message: string, last: T) {
    super(message);
    this.last = last;
  }
}

export interface RequestOptions {
  /** Your own Idempotency-Key for a write (default: a fresh UUID per call). */
  idempotencyKey?: string;
  /** Abort the call (its waits and retries included). */
  signal?: AbortSignal;
}

const RETRY_STATUSES = new Set([502, 503, 504]);
const ACCEPT = {
  json: "application/json",
  text: "application/jsonl, application/json",
  binary: "application/zip, application/octet-stream, application/json;q=0.5",
} as const;
const WRITE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);
export const IDEMPOTENCY_HEADER = "Idempotency-Key";

function sleep(seconds: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, seconds * 1000);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function attemptSignal(timeout: number, signal?: AbortSignal): AbortSignal {
  const limit = AbortSignal.timeout(timeout * 1000);
  if (!signal) return limit;
  const any = (AbortSignal as { any?: (signals: AbortSignal[]) => AbortSignal }).any;
  return any ? any([signal, limit]) : signal;
}

function newKey(): string {
  return globalThis.crypto.randomUUID();
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function appendQuery(url: URL, query: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue;
    if (name === "metadata" && isPlainObject(value)) {
      // The list endpoints' metadata filter: metadata.<key>=<JSON value> keeps the type;
      // metadata.<key>.$op=<JSON value> applies an operator ($in takes a JSON array).
      for (const [key, wanted] of Object.entries(value)) {
        if (isPlainObject(wanted)) {
          for (const [operator, operand] of Object.entries(wanted)) {
            if (operand !== undefined) url.searchParams.append(`metadata.${key}.${operator}`, JSON.stringify(operand));
          }
        } else if (wanted !== undefined) {
          url.searchParams.append(`metadata.${key}`, JSON.stringify(wanted));
        }
      }
    } else if (name === "created_at" && isPlainObject(value)) {
      // A storage-time range: created_at.$gte=<ISO 8601>.
      for (const [operator, bound] of Object.entries(value)) {
        if (bound !== undefined && bound !== null) url.searchParams.append(`created_at.${operator}`, String(bound));
      }
    } else if (name === "filters" && isPlainObject(value)) {
      // The object recall takes in its body, as one JSON text.
      url.searchParams.append(name, JSON.stringify(value));
    } else if (Array.isArray(value)) {
      for (const item of value) url.searchParams.append(name, String(item));
    } else {
      url.searchParams.append(name, String(value));
    }
  }
}

function firstArray(page: Record<string, unknown>): unknown[] {
  for (const value of Object.values(page)) if (Array.isArray(value)) return value;
  return [];
}

type ListItem<K extends OperationId, F extends string> =
  ResponseOf<K> extends infer R
    ? F extends keyof R
      ? NonNullable<R[F]> extends readonly (infer T)[]
        ? T
        : unknown
      : unknown
    : unknown;

/**
 * The aetnaweb API client. ``new AetnawebClient({ url, token })``.
 *
 * Each operation has a method (``remember``, ``recall``, ``listRecords`` ...);
 * ``call(operationId, args)`` reaches any operation by its OpenAPI operationId.
 * Refusals throw ``ApiError`` subclasses (``BadRequest``, ``NotFound``,
 * ``RateLimited`` ...) carrying the server's ``code``, ``field`` and ``detail``.
 */
export class AetnawebClient {
  readonly baseUrl: string;
  readonly retries: number;
  readonly backoff: number;
  readonly rateLimitRetries: number;
  readonly maxRetryAfter: number;
  readonly timeout: number;
  readonly #token: string;
  readonly #fetch: typeof fetch;
  readonly #headers: Record<string, string>;

  constructor(options: ClientOptions) {
    if (!options.url) throw new TypeError("AetnawebClient: url is required");
    if (!options.token) throw new TypeError("AetnawebClient: token is required");
    this.baseUrl = options.url.replace(/\/+$/, "").replace(/\/api\/v1$/, "");
    this.#token = options.token;
    this.retries = options.retries ?? 2;
    this.backoff = options.backoff ?? 0.2;
    this.rateLimitRetries = options.rateLimitRetries ?? 2;
    this.maxRetryAfter = options.maxRetryAfter ?? 60;
    this.timeout = options.timeout ?? 30;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#headers = options.headers ?? {};
  }

  /** Send any operation by its operationId, e.g. ``call("get_record", { path: { record_id } })``. */
  async call<K extends OperationId>(
    operationId: K,
    ...[args, options]: keyof CallArgs<K> extends never
      ? [args?: CallArgs<K>, options?: RequestOptions]
      : [args: CallArgs<K>, options?: RequestOptions]
  ): Promise<ResponseOf<K>> {
    const route = OPERATIONS[operationId];
    if (!route) throw new TypeError(`unknown operation ${String(operationId)}`);
    const given = (args ?? {}) as { path?: Record<string, string | number>; query?: Record<string, unknown>; body?: unknown };
    let path: string = route.path;
    for (const name of route.pathParams) {
      const value = given.path?.[name];
      if (value === undefined || value === "") throw new TypeError(`${operationId}: path.${name} is required`);
      // Quote everything: an ID holding "../" or "?" cannot change the URL.
      path = path.replace(`{${name}}`, encodeURIComponent(String(value)));
    }
    const url = new URL(this.baseUrl + path);
    if (given.query) appendQuery(url, given.query);
    const write = WRITE_METHODS.has(route.method);
    const headers: Record<string, string> = {
      ...this.#headers,
      Authorization: `Bearer ${this.#token}`,
      Accept: ACCEPT[route.response],
    };
    let body: string | undefined;
    if (write) {
      // One key per call, reused by its retries: that is what makes a retry a replay.
      headers[IDEMPOTENCY_HEADER] = options?.idempotencyKey ?? newKey();
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(given.body ?? {});
    }
    const response = await this.#send(route.method, url, headers, body, options?.signal);
    if (route.response === "text") return (await response.text()) as ResponseOf<K>;
    // A file (a subject export's ZIP): the bytes, through the platform's fetch (edge-safe).
    if (route.response === "binary") return new Uint8Array(await response.arrayBuffer()) as ResponseOf<K>;
    try {
      return (await response.json()) as ResponseOf<K>;
    } catch (cause) {
      throw new TransportError(`${route.method} ${url.pathname}: the server answered non-JSON`, { cause });
    }
  }

  async #send(
    method: string,
    url: URL,
    headers: Record<string, string>,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    let failures = 0;
    let limited = 0;
    for (;;) {
      let response: Response;
      try {
        response = await this.#fetch(url, { method, headers, body, signal: attemptSignal(this.timeout, signal) });
      } catch (cause) {
        if (signal?.aborted) throw cause;
        if (failures >= this.retries) {
          throw new TransportError(`${method} ${url.pathname}: ${(cause as Error)?.message ?? cause}`, { cause });
        }
        await sleep(this.backoff * 2 ** failures++, signal);
        continue;
      }
      if (response.ok) return response;
      if (response.status === 429 && limited < this.rateLimitRetries) {
        // Nothing was done; waiting as told is safe for writes too (same key).
        const told = retryAfterSeconds(response.headers.get("Retry-After"));
        const wait = Math.min(this.maxRetryAfter, told ?? this.backoff * 2 ** limited);
        limited++;
        await response.body?.cancel();
        await sleep(wait, signal);
        continue;
      }
      if (RETRY_STATUSES.has(response.status) && failures < this.retries) {
        await response.body?.cancel();
        await sleep(this.backoff * 2 ** failures++, signal);
        continue;
      }
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: the error carries the text
      }
      throw errorFor(response.status, parsed, response.headers);
    }
  }

  /** Every item of a paged list, following ``next_cursor`` (each page is one request). */
  async *paginate<K extends OperationId, F extends string>(
    operationId: K,
    field: F,
    args: { query?: QueryArgs<K> } = {},
    options?: RequestOptions,
  ): AsyncGenerator<ListItem<K, F>, void, undefined> {
    let after: string | undefined;
    for (;;) {
      const query = { ...(args.query ?? {}), ...(after ? { after } : {}) };
      const call = this.call as (id: OperationId, a: object, o?: RequestOptions) => Promise<unknown>;
      const page = (await call.call(this, operationId, { ...args, query }, options)) as Record<string, unknown>;
      const items = Array.isArray(page[field]) ? (page[field] as unknown[]) : firstArray(page);
      for (const item of items) yield item as ListItem<K, F>;
      const next = page.next_cursor;
      if (typeof next !== "string" || next === "") return;
      after = next;
    }
  }

  // -- the token ---------------------------------------------------------------------

  /** The calling token's scope subtree, capabilities and expiry. */
  whoami(options?: RequestOptions) {
    return this.call("whoami", {}, options);
  }

  // -- memory writes -------------------------------------------------------------------

  /** Store a message (``text``) or an explicit ``key``/``value`` at exactly ``scope``. */
  remember(body: RequestBody<"remember">, options?: RequestOptions) {
    return this.call("remember", { body }, options);
  }

  /** Remember several items in one request. */
  rememberBatch(body: RequestBody<"remember_batch">, options?: RequestOptions) {
    return this.call("remember_batch", { body }, options);
  }

  /** Import a conversation's turns at exactly ``scope``, all or nothing. */
  importConversation(body: RequestBody<"import_conversation">, options?: RequestOptions) {
    return this.call("import_conversation", { body }, options);
  }

  /** A host's turn hook: a ``user`` turn is remembered, others leave a digest. */
  capture(body: RequestBody<"capture">, options?: RequestOptions) {
    return this.call("capture", { body }, options);
  }

  /** What a forget would purge: records and stored messages (writes nothing). */
  forgetPreview(body: RequestBody<"forget_preview">, options?: RequestOptions) {
    return this.call("forget_preview", { body }, options);
  }

  /** Purge matching records and stored messages at exactly ``scope``; answers the deletion receipt. */
  forget(body: RequestBody<"forget">, options?: RequestOptions) {
    return this.call("forget", { body }, options);
  }

  /** Propose facts (quarantined until a person reviews them). */
  propose(body: RequestBody<"propose">, options?: RequestOptions) {
    return this.call("propose", { body }, options);
  }

  /** Append an ``agent.*`` event (digests, IDs, counts: never content) to the audit chain. */
  logAction(body: RequestBody<"log_action">, options?: RequestOptions) {
    return this.call("log_action", { body }, options);
  }

  /** Correct a record: a new version supersedes it. */
  correctRecord(recordId: string, body: RequestBody<"correct_record">, options?: RequestOptions) {
    return this.call("correct_record", { path: { record_id: recordId }, body }, options);
  }

  // -- memory reads --------------------------------------------------------------------

  /** The most relevant active memories visible from ``scope`` (audited). */
  recall(body: RequestBody<"recall">, options?: RequestOptions) {
    return this.call("recall", { body }, options);
  }

  /** A ``<relevant_memories>`` block for a prompt (empty text, ``abstained``, when nothing fits). */
  recallBlock(body: RequestBody<"recall_block">, options?: RequestOptions) {
    return this.call("recall_block", { body }, options);
  }

  /** The bounded persona text of the active facts visible from ``scope``. */
  persona(body: RequestBody<"persona">, options?: RequestOptions) {
    return this.call("persona", { body }, options);
  }

  /** One page of scenes; ``iterScenes`` follows the cursor. */
  scenes(query: QueryArgs<"scenes">, options?: RequestOptions) {
    return this.call("scenes", { query }, options);
  }

  /** Every scene at ``scope``, newest first. */
  iterScenes(query: Omit<QueryArgs<"scenes">, "after">, options?: RequestOptions) {
    return this.paginate("scenes", "items", { query }, options);
  }

  /** One page of records; ``iterRecords`` follows the cursor. */
  listRecords(query: QueryArgs<"list_records">, options?: RequestOptions) {
    return this.call("list_records", { query }, options);
  }

  /** Every record at ``scope`` matching the filters, newest first. */
  iterRecords(query: Omit<QueryArgs<"list_records">, "after">, options?: RequestOptions) {
    return this.paginate("list_records", "items", { query }, options);
  }

  /** One record with its supersession chain, episode, audit events and recalls. */
  getRecord(recordId: string, options?: RequestOptions) {
    return this.call("get_record", { path: { record_id: recordId } }, options);
  }

  /** A record's versions, oldest first. */
  recordHistory(recordId: string, options?: RequestOptions) {
    return this.call("record_history", { path: { record_id: recordId } }, options);
  }

  // -- data subjects ---------------------------------------------------------------------

  /**
   * Start exporting everything stored under one person's subtree (``scope: "acme:dana:*"``,
   * ``reference``: the request's ticket) as a job (202). Follow it with
   * ``waitForSubjectExport`` (or ``getSubjectExport``), then ``downloadSubjectExport``.
   * Admins of the subtree (a token with every capability on a grant covering it).
   */
  exportSubject(body: RequestBody<"export_subject">, options?: RequestOptions) {
    return this.call("export_subject", { body }, options);
  }

  /** A subject export's status (running, done, error, stale), progress, counts and ``expires_at``. */
  getSubjectExport(jobId: PathParams<"subject_export">["job_id"], options?: RequestOptions) {
    return this.call("subject_export", { path: { job_id: jobId } }, options);
  }

  /**
   * Poll a subject export until it is no longer running (every ``poll`` seconds, default 1)
   * and resolve to its last status: ``done`` (download it), ``error`` or ``stale``.
   * Throws ``WaitTimeout`` (carrying that last status) when it still runs after
   * ``timeout`` seconds (default 600); ``signal`` aborts the wait.
   */
  async waitForSubjectExport(
    jobId: PathParams<"subject_export">["job_id"],
    { poll = 1, timeout = 600, signal }: WaitOptions = {},
  ): Promise<ResponseOf<"subject_export">> {
    if (!(poll > 0) || !(timeout >= 0)) throw new TypeError("waitForSubjectExport: poll must be > 0, timeout >= 0");
    const deadline = Date.now() + timeout * 1000;
    for (;;) {
      const job = await this.getSubjectExport(jobId, { signal });
      if (job.status !== "running") return job;
      const left = (deadline - Date.now()) / 1000;
      if (left <= 0) throw new WaitTimeout(`subject export ${jobId} still running after ${timeout} s`, job);
      await sleep(Math.min(poll, left), signal);
    }
  }

  /**
   * A finished subject export's ZIP file (``export.json`` and the CSV files), as bytes.
   * ``Conflict`` (``subject_export_not_ready``) while it runs or after it failed;
   * ``Gone`` (``subject_export_expired``) once its file expired.
   */
  downloadSubjectExport(jobId: PathParams<"download">["job_id"], options?: RequestOptions): Promise<Uint8Array> {
    return this.call("download", { path: { job_id: jobId } }, options);
  }

  /** What erasing a data subject would remove (writes nothing). */
  eraseSubjectPreview(body: RequestBody<"erase_subject_preview">, options?: RequestOptions) {
    return this.call("erase_subject_preview", { body }, options);
  }

  /** Start erasing a data subject (a job: follow it with ``getErasure``). */
  eraseSubject(body: RequestBody<"erase_subject">, options?: RequestOptions) {
    return this.call("erase_subject", { body }, options);
  }

  /** An erasure job's state. */
  getErasure(jobId: PathParams<"erasure">["job_id"], options?: RequestOptions) {
    return this.call("erasure", { path: { job_id: jobId } }, options);
  }

  /** A finished erasure's signed certificate (JSON). */
  erasureCertificate(jobId: PathParams<"erasure_certificate_json">["job_id"], options?: RequestOptions) {
    return this.call("erasure_certificate_json", { path: { job_id: jobId } }, options);
  }

  /** The legal holds in force under ``scope``. */
  listLegalHolds(query: QueryArgs<"list_legal_holds">, options?: RequestOptions) {
    return this.call("list_legal_holds", { query }, options);
  }

  /** Place a legal hold: nothing under it is forgotten or erased until lifted. */
  createLegalHold(body: RequestBody<"create_legal_hold">, options?: RequestOptions) {
    return this.call("create_legal_hold", { body }, options);
  }

  /** Lift the legal hold at ``scope``. */
  liftLegalHold(body: RequestBody<"lift">, options?: RequestOptions) {
    return this.call("lift", { body }, options);
  }

  // -- retention -----------------------------------------------------------------------

  /** The retention policies that apply at ``scope`` or below it, each with its last run. */
  listRetentionPolicies(query: QueryArgs<"list_retention_policies">, options?: RequestOptions) {
    return this.call("list_retention_policies", { query }, options);
  }

  /**
   * Keep one kind of content (``target``: ``episodes``, ``quarantined`` or ``records``) at
   * a subtree for ``keep_days``; setting it again replaces the keep (admins of the subtree).
   */
  setRetentionPolicy(body: RequestBody<"create_retention_policy">, options?: RequestOptions) {
    return this.call("create_retention_policy", { body }, options);
  }

  /** Remove the retention policy for ``target`` at ``scope`` (that content is kept until forgotten). */
  removeRetentionPolicy(body: RequestBody<"remove_policy">, options?: RequestOptions) {
    return this.call("remove_policy", { body }, options);
  }

  // -- guarded actions -----------------------------------------------------------------

  /** Stage an exact plan for a person to approve in the dashboard. */
  stage(body: RequestBody<"stage">, options?: RequestOptions) {
    return this.call("stage", { body }, options);
  }

  /** One page of transactions; ``iterTransactions`` follows the cursor. */
  listTransactions(query: QueryArgs<"list_transactions"> = {}, options?: RequestOptions) {
    return this.call("list_transactions", { query }, options);
  }

  /** Every transaction the token may read, newest first. */
  iterTransactions(query: Omit<QueryArgs<"list_transactions">, "after"> = {}, options?: RequestOptions) {
    return this.paginate("list_transactions", "items", { query }, options);
  }

  /** One transaction with its plan, approvals and world patch. */
  getTransaction(transactionId: string, options?: RequestOptions) {
    return this.call("show_transaction", { path: { transaction_id: transactionId } }, options);
  }

  /** Re-verify a transaction's evidence. */
  verifyTransaction(transactionId: string, options?: RequestOptions) {
    return this.call("verify_transaction", { path: { transaction_id: transactionId } }, options);
  }

  // -- audit ---------------------------------------------------------------------------

  /** Verify the audit chains inside the token's subtree (or ``scope``). */
  verifyAudit(query: QueryArgs<"verify_audit_chains"> = {}, options?: RequestOptions) {
    return this.call("verify_audit_chains", { query }, options);
  }

  /** Audit events as JSON Lines text. */
  exportAudit(query: QueryArgs<"export_audit_events"> = {}, options?: RequestOptions) {
    return this.call("export_audit_events", { query }, options);
  }

  /** A new ``aetnamem-checkpoint-v1`` line (keep it outside the server). */
  createCheckpoint(options?: RequestOptions) {
    return this.call("create_checkpoint", {}, options);
  }

  /** The consistency proof between two checkpoints (``old`` and ``new``: checkpoint IDs; ``new`` defaults to the newest). */
  checkpointConsistency(query: QueryArgs<"checkpoint_consistency_bundle">, options?: RequestOptions) {
    return this.call("checkpoint_consistency_bundle", { query }, options);
  }
}

/**
 * The client method for each operation (``npm test`` fails when the served document
 * has an operation missing here; ``call(operationId, ...)`` reaches it meanwhile).
 */
export const METHOD_FOR_OPERATION = {
  whoami: "whoami",
  remember: "remember",
  remember_batch: "rememberBatch",
  import_conversation: "importConversation",
  capture: "capture",
  forget_preview: "forgetPreview",
  forget: "forget",
  propose: "propose",
  log_action: "logAction",
  correct_record: "correctRecord",
  recall: "recall",
  recall_block: "recallBlock",
  persona: "persona",
  scenes: "scenes",
  list_records: "listRecords",
  get_record: "getRecord",
  record_history: "recordHistory",
  export_subject: "exportSubject",
  subject_export: "getSubjectExport",
  download: "downloadSubjectExport",
  erase_subject_preview: "eraseSubjectPreview",
  erase_subject: "eraseSubject",
  erasure: "getErasure",
  erasure_certificate_json: "erasureCertificate",
  list_legal_holds: "listLegalHolds",
  create_legal_hold: "createLegalHold",
  lift: "liftLegalHold",
  list_retention_policies: "listRetentionPolicies",
  create_retention_policy: "setRetentionPolicy",
  remove_policy: "removeRetentionPolicy",
  stage: "stage",
  list_transactions: "listTransactions",
  show_transaction: "getTransaction",
  verify_transaction: "verifyTransaction",
  verify_audit_chains: "verifyAudit",
  export_audit_events: "exportAudit",
  create_checkpoint: "createCheckpoint",
  checkpoint_consistency_bundle: "checkpointConsistency",
} as const satisfies Partial<Record<OperationId, keyof AetnawebClient>>;
