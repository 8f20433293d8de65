// Typed errors: every refusal of the API is JSON {error, field, detail}; each HTTP
// status the API answers with gets its own class, carrying the server's code.
import type { ErrorCode } from "./operations.js";

/** Base of every error this client throws. */
export class AetnawebError extends Error {
  override name = "AetnawebError";
}

/** The server could not be reached, timed out, or answered something that is not the API. */
export class TransportError extends AetnawebError {
  override name = "TransportError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The parsed refusal body; ``code`` is one of ``ErrorCode`` (or a code newer than this package). */
export interface ErrorBody {
  error: ErrorCode | (string & {});
  field: string | null;
  detail: string;
}

/**
 * A refusal from the API: ``status``, the server's ``code`` (``error`` in the JSON),
 * the ``field`` at fault (dotted, e.g. ``facts.0.content``) and a ``detail`` sentence.
 */
export class ApiError extends AetnawebError {
  override name = "ApiError";
  readonly status: number;
  readonly code: ErrorCode | (string & {});
  readonly field: string | null;
  readonly detail: string;
  readonly headers: Headers;

  constructor(status: number, body: ErrorBody, headers: Headers = new Headers()) {
    const where = body.field ? ` (${body.field})` : "";
    super(`${status} ${body.error}${where}: ${body.detail}`);
    this.status = status;
    this.code = body.error;
    this.field = body.field;
    this.detail = body.detail;
    this.headers = headers;
  }
}

/** 400: bad input (``field`` names it) or a domain refusal; nothing was written. */
export class BadRequest extends ApiError {
  override name = "BadRequest";
}

/** 401: the token is missing, malformed, unknown, revoked or expired. */
export class Unauthorized extends ApiError {
  override name = "Unauthorized";
}

/** 403: the token reaches the scope but lacks the capability. */
export class Forbidden extends ApiError {
  override name = "Forbidden";
}

/** 404: outside the token's subtree, or does not exist (the API never says which). */
export class NotFound extends ApiError {
  override name = "NotFound";
}

/** 409: the state is not what the request assumed (a stale preview, a key still in flight). */
export class Conflict extends ApiError {
  override name = "Conflict";
}

/** 410: the answer stored for this Idempotency-Key is gone. */
export class Gone extends ApiError {
  override name = "Gone";
}

/** 422: the Idempotency-Key was already used for another request. */
export class Unprocessable extends ApiError {
  override name = "Unprocessable";
}

/**
 * 429: the token's requests for this window are used up; nothing was done.
 * ``retryAfter`` is the server's ``Retry-After`` in seconds (null if it sent none).
 * The client has already waited and retried ``rateLimitRetries`` times when it throws.
 */
export class RateLimited extends ApiError {
  override name = "RateLimited";
  readonly retryAfter: number | null;

  constructor(status: number, body: ErrorBody, headers: Headers = new Headers()) {
    super(status, body, headers);
    this.retryAfter = retryAfterSeconds(headers.get("Retry-After"));
  }
}

/** 5xx: the server failed or is unavailable. */
export class ServerError extends ApiError {
  override name = "ServerError";
}

const BY_STATUS: Record<number, typeof ApiError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  410: Gone,
  422: Unprocessable,
  429: RateLimited,
};

/** ``Retry-After`` as seconds: a number of seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterSeconds(value: string | null, now: number = Date.now()): number | null {
  if (value === null || value.trim() === "") return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds : null;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}

function isErrorBody(body: unknown): body is { error: string; field?: unknown; detail?: unknown } {
  return typeof body === "object" && body !== null && typeof (body as { error?: unknown }).error === "string";
}

/** The typed error for a non-2xx answer (``body`` as parsed JSON, or its text). */
export function errorFor(status: number, body: unknown, headers: Headers = new Headers()): ApiError {
  const parsed: ErrorBody = isErrorBody(body)
    ? {
        error: body.error,
        field: typeof body.field === "string" ? body.field : null,
        detail: typeof body.detail === "string" ? body.detail : "",
      }
    : { error: "http_error", field: null, detail: String(body).slice(0, 500) };
  const cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  return new cls(status, parsed, headers);
}
