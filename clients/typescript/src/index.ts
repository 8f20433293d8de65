// @aetnaweb/client: the typed, fetch-based aetnaweb API client (no dependency).
// The Vercel AI SDK tools are a separate entry point: "@aetnaweb/client/ai".
export {
  AetnawebClient,
  IDEMPOTENCY_HEADER,
  METHOD_FOR_OPERATION,
  WaitTimeout,
  type CallArgs,
  type ClientOptions,
  type CreatedAtRange,
  type MetadataCondition,
  type MetadataValue,
  type OperationId,
  type PathParams,
  type Query,
  type QueryArgs,
  type RecordFilter,
  type RequestBody,
  type RequestOptions,
  type ResponseOf,
  type Schemas,
  type WaitOptions,
} from "./client.js";
export {
  AetnawebError,
  ApiError,
  BadRequest,
  Conflict,
  Forbidden,
  Gone,
  NotFound,
  RateLimited,
  ServerError,
  TransportError,
  Unauthorized,
  Unprocessable,
  errorFor,
  retryAfterSeconds,
  type ErrorBody,
} from "./errors.js";
export { ERROR_CODES, OPERATIONS, type ErrorCode, type OperationRoute } from "./operations.js";
export type { components, operations, paths } from "./generated.js";
