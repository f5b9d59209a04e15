export { SandfortClient } from "./client.js";
export type { ClientOptions } from "./config.js";
export { Sandbox } from "./sandboxes.js";
export { Commands, CommandHandle } from "./commands.js";
export { Sessions, Session } from "./sessions.js";
export type { SessionRunOptions } from "./sessions.js";
export { Files, WatchHandle } from "./files.js";
export type { WriteData, WatchOptions } from "./files.js";
export { Git } from "./git.js";
export { Code } from "./code.js";
export type {
  CodeContext,
  CodeContextLanguage,
  CodeError,
  CodeEvent,
  CodeResult,
  CreateCodeContextOptions,
  Execution,
  RunCodeOptions,
} from "./code.js";
export type { TokenProvider } from "./http.js";
export { SandfortError } from "./errors.js";
export type { ErrorCode } from "./errors.js";
export type { Limits, LimitField, LimitsUpdate, LimitsUsage, OrgLimits, StopAllReport } from "./guardrails.js";
export {
  Audit,
  verifyChain,
  canonicalJson,
  eventCanonicalJson,
  eventHash,
  checkpointMessage,
  compareCodePoints,
  GENESIS_HASH,
} from "./audit.js";
export type {
  AuditEvent,
  AuditCheckpoint,
  AuditPublicKey,
  AuditVerifyReport,
  AuditFilter,
  ListAuditEventsOptions,
  AuditExportOptions,
} from "./audit.js";
export { EventStream } from "./events.js";
export type { EventsOptions, LifecycleEvent, StopReason } from "./events.js";
export { PtyApi, PtyHandle } from "./pty.js";
export type { PtyOptions } from "./pty.js";
export type * from "./types.js";
export { Secrets } from "./secrets.js";
export type { Secret, SecretPlacement, CreateSecretOptions, RotateSecretOptions } from "./secrets.js";
export { Webhooks, WebhookSignatureError, verifyWebhook, signWebhook, DEFAULT_WEBHOOK_TOLERANCE_S } from "./webhooks.js";
export type { Webhook, WebhookDelivery, CreateWebhookOptions, UpdateWebhookOptions, VerifyWebhookOptions } from "./webhooks.js";
