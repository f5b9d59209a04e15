export { SandfortClient, Sandbox, Commands, CommandHandle, Sessions, Session, Files } from "./client.js";
export type { ClientOptions, SessionRunOptions, WriteData } from "./client.js";
export type { TokenProvider } from "./http.js";
export { SandfortError } from "./errors.js";
export { PtyApi, PtyHandle } from "./pty.js";
export type { PtyOptions } from "./pty.js";
export type * from "./types.js";
