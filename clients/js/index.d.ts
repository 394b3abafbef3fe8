// Types of @myriad/client (hand-written: the package is plain JavaScript).

/** The transports, in the client's default order of preference. */
export type TransportKind = "websocket" | "sse" | "longpoll";

export interface ClientOptions {
  /** A user id: the connection also carries that user's own deliveries (`/ws/<id>`, …). */
  user?: number | string;
  /** Where the user's stream resumes from (`"<epoch>-<seq>"`); from now without it. */
  userSince?: string;
  /**
   * Called before each (re)connect and by refreshToken(); the token goes in `?token=`.
   * Without it no token is sent (a server without JWT).
   */
  getToken?: () => Promise<string | null | undefined> | string | null | undefined;
  /** Transports to try, in order; default ["websocket", "sse", "longpoll"]. */
  transports?: TransportKind[];
  /** WebSocket constructor; default the global one (Node 20: pass `ws`'s). */
  WebSocket?: unknown;
  /** EventSource constructor; default the global one (Node: pass the `eventsource` package's). */
  EventSource?: unknown;
  /** fetch function for long-poll and history; default the global one. */
  fetch?: typeof fetch;
  /** Reconnect delays: exponential from `initial` ms up to `max` ms, with jitter. */
  backoff?: { initial?: number; max?: number };
  /** Milliseconds a WebSocket or EventSource may take to open before the next transport is tried (5000). */
  openTimeout?: number;
  /** Milliseconds one long-poll request may take (60000; more than the server's --poll-timeout). */
  requestTimeout?: number;
  /**
   * With `user`: `friends` events when users that user follows come online or go
   * offline (`friends=1`; WebSocket and SSE; long-poll reports an `unsupported` error).
   */
  friends?: boolean;
}

/** A message of a channel, or (with `user`) of the user's own stream. */
export interface Message {
  channel?: string;
  user?: number | string;
  /** A message of the user's stream: the subject it was published to (WebSocket, long-poll). */
  subject?: number;
  /** The payload as the publisher sent it. */
  data: string;
  /** The stream's position after this message, `"<epoch>-<seq>"`. */
  pos: string;
}

/** Messages were lost (history gone or too short): the stream goes on from here. */
export interface Gap {
  channel?: string;
  user?: number | string;
  /** WebSocket: the position the stream continues from. */
  pos?: string;
  epoch?: number;
  /** SSE: the seq of the first message after the gap. */
  first?: number;
}

export interface ClientError {
  /**
   * `connect`: a transport failed to open (the next is tried); `refused`: a channel the
   * token does not allow (dropped); `refresh`: a refused token refresh; `token`:
   * getToken threw; `server`: another error frame; `protocol`: a frame not understood;
   * `unsupported`: the transport cannot carry what was asked (friends on long-poll).
   */
  kind: "connect" | "refused" | "refresh" | "token" | "server" | "protocol" | "unsupported";
  message: string;
  channel?: string;
  transport?: TransportKind;
}

export interface Subscribed {
  channel: string;
  /** Where the channel stands, or null when the transport did not say yet (SSE, before a message). */
  pos: string | null;
  gap: boolean;
}

export interface Published {
  connections: number;
  users: number;
}

export interface History {
  channel: string;
  messages: { seq: number; data: string }[];
  /** Where to subscribe from to continue with no gap and no duplicate. */
  pos: string;
  gap: boolean;
}

/** A user's first connection joined `channel` (`joined`), or their last one left it (`left`). */
export interface PresenceChange {
  channel: string;
  joined?: number;
  left?: number;
}

/** `GET /presence/<channel>`: who is in it now. */
export interface Presence {
  channel: string;
  users: { user: number; connections: number; info?: Record<string, unknown> }[];
  /** Users in the channel (the list may be cut: `cut`). */
  count: number;
  /** Connections subscribed, with or without a user. */
  connections: number;
  cut: boolean;
}

export interface ClientEvents {
  message: Message;
  /** Joins and leaves of a channel subscribed with `presence: true` (WebSocket, SSE). */
  presence: PresenceChange;
  /**
   * With `friends: true`: who of those the user follows came online or went offline
   * since the last one (coalesced by the server, at most one a second); `cut` when the
   * server named only the newest 256 (ask your back-end for `GET /online/<user>`).
   */
  friends: { online: number[]; offline: number[]; cut?: true };
  gap: Gap;
  error: ClientError;
  /** The server took a channel (again after each reconnect). */
  subscribed: Subscribed;
  connected: { transport: TransportKind };
  disconnected: { transport: TransportKind; reason: string };
}

export class MyriadClient {
  /** @param url the server's base URL; in a browser the page's origin by default. */
  constructor(url?: string, options?: ClientOptions);
  readonly state: "idle" | "connecting" | "connected" | "closed";
  /** The transport in use while connected. */
  readonly transport: TransportKind | null;
  /** The channels subscribed, in order. */
  readonly channels: string[];
  /** Where a channel stands, `"<epoch>-<seq>"`, or null. */
  position(channel: string): string | null;
  on<K extends keyof ClientEvents>(type: K, fn: (event: ClientEvents[K]) => void): () => void;
  off<K extends keyof ClientEvents>(type: K, fn: (event: ClientEvents[K]) => void): void;
  /** Starts connecting; reconnects until close(). */
  connect(): void;
  close(): void;
  /** Resolves once the server took the channel; rejects if it is refused or unsubscribed first. */
  subscribe(channel: string, options?: { since?: string; presence?: boolean }): Promise<Subscribed>;
  unsubscribe(channel: string): void;
  /**
   * As the token's `pub` claim allows: over the WebSocket, or on SSE and long-poll as
   * `POST /pub/<channel>?token=…`; rejects with the server's refusal (403, 429).
   */
  publish(channel: string | number, data: string): Promise<Published>;
  /**
   * Calls getToken and hands the new token to the connection. On a WebSocket resolves to
   * the server's answer (`valid_until`: unix seconds the new token ends, or null) and
   * rejects when the server refuses the token; otherwise resolves to undefined.
   */
  refreshToken(): Promise<{ valid_until: number | null } | undefined>;
  /** `limit`: 1 to 1000; without `since`, the newest `limit` messages. */
  history(channel: string, options?: { since?: string; limit?: number; signal?: AbortSignal }): Promise<History>;
  /** Who is in `channel`, asked with the client's token (`Authorization: Bearer`). */
  presence(channel: string, options?: { signal?: AbortSignal }): Promise<Presence>;
}
