// One client of a myriad server: the application's channels and where each stands,
// one transport at a time (WebSocket, else SSE, else long-poll), and the reconnect
// loop that resumes every stream from its position. The transports only carry
// frames; what the application sees — each message once and in order per stream,
// gaps, refusals, errors — is decided here.

import { backoffDelay, DEFAULT_BACKOFF } from "./backoff.js";
import { Emitter } from "./emitter.js";
import { checkChannel } from "./names.js";
import { Position, USER, composite, isNew } from "./positions.js";
import { Requests } from "./requests.js";
import { httpUrl } from "./url.js";
import { WebSocketTransport } from "./transports/websocket.js";
import { SseTransport } from "./transports/sse.js";
import { LongPollTransport } from "./transports/longpoll.js";

const TRANSPORTS = { websocket: WebSocketTransport, sse: SseTransport, longpoll: LongPollTransport };
/** After a drain notice, reconnects are spread over this long (ms). */
const RESUME_SPREAD = 1000;

export class MyriadClient {
  #base;
  #user;
  #getToken;
  #options;
  #kinds;
  #events = new Emitter();
  /**
   * Channel name → { pos, confirmed, learned (its position was asked of its history),
   * waiters }, in the order they were subscribed.
   */
  #channels = new Map();
  /** The user's own stream, when a user id was given. */
  #userStream = null;
  #token = null;
  #state = "idle";
  #transport = null;
  /** Index in #kinds of the transport being tried or used, and where the round began. */
  #index = 0;
  #roundStart = 0;
  #failures = 0;
  #timer = null;
  #attempt = 0;
  #restartQueued = false;
  /** WebSocket requests sent and not answered yet. */
  #pending = new Requests();
  /** Publishes made while no transport was open. */
  #waitingPublishes = [];

  /**
   * @param {string} url the server's base URL (`http://host:port`), in a browser the
   *   page's origin by default
   * @param {object} [options] see index.d.ts
   */
  constructor(url = globalThis.location?.origin, options = {}) {
    if (!url) throw new TypeError("a server URL is needed (no page origin to default to)");
    this.#base = String(url);
    this.#user = options.user ?? null;
    if (this.#user !== null) this.#userStream = { pos: Position.parse(options.userSince) };
    if (options.friends === true && this.#user === null) throw new TypeError("friends: true needs options.user");
    this.#getToken = options.getToken ?? null;
    this.#kinds = options.transports ?? ["websocket", "sse", "longpoll"];
    for (const k of this.#kinds) {
      if (!(k in TRANSPORTS)) throw new TypeError(`unknown transport "${k}" (websocket, sse, longpoll)`);
    }
    if (this.#kinds.length === 0) throw new TypeError("at least one transport is needed");
    this.#options = {
      WebSocket: options.WebSocket ?? globalThis.WebSocket,
      EventSource: options.EventSource ?? globalThis.EventSource,
      fetch: options.fetch ?? globalThis.fetch?.bind(globalThis),
      backoff: { ...DEFAULT_BACKOFF, ...options.backoff },
      openTimeout: options.openTimeout ?? 5000,
      friends: options.friends === true,
      requestTimeout: options.requestTimeout ?? 60000,
    };
  }

  /** `"idle"` (before connect), `"connecting"`, `"connected"` or `"closed"`. */
  get state() {
    return this.#state;
  }

  /** The transport in use while connected: `"websocket"`, `"sse"` or `"longpoll"`. */
  get transport() {
    return this.#state === "connected" ? this.#transport?.kind ?? null : null;
  }

  /** The channels subscribed, in order. */
  get channels() {
    return [...this.#channels.keys()];
  }

  /** Where `channel` stands (`"<epoch>-<seq>"`), or null before its first position. */
  position(channel) {
    return this.#channels.get(channel)?.pos?.toString() ?? null;
  }

  on(type, fn) {
    return this.#events.on(type, fn);
  }

  off(type, fn) {
    this.#events.off(type, fn);
  }

  /** Starts connecting; the client then stays connected until close(). */
  connect() {
    if (this.#state === "closed") throw new Error("this client was closed");
    if (this.#state !== "idle") return;
    this.#state = "connecting";
    this.#next(0);
  }

  /** Ends the connection for good: waiting calls are rejected. */
  close() {
    if (this.#state === "closed") return;
    this.#state = "closed";
    clearTimeout(this.#timer);
    this.#transport?.close();
    this.#transport = null;
    const closed = new Error("the client was closed");
    for (const entry of this.#channels.values()) this.#settle(entry, null, closed);
    this.#pending.failAll(closed);
    for (const p of this.#waitingPublishes.splice(0)) p.reject(closed);
  }

  /**
   * Adds `channel`; resolves once the server has taken it ({channel, pos, gap}). With
   * `since` it starts after that position (from history), otherwise from now. With
   * `presence: true` the channel's joins and leaves arrive as `presence` events
   * (over WebSocket and SSE; long-poll carries none).
   */
  subscribe(channel, { since, presence } = {}) {
    checkChannel(channel);
    if (this.#state === "closed") return Promise.reject(new Error("the client was closed"));
    let entry = this.#channels.get(channel);
    if (entry?.confirmed) return Promise.resolve({ channel, pos: this.position(channel), gap: false });
    const promise = new Promise((resolve, reject) => {
      if (!entry) {
        entry = {
          pos: Position.parse(since),
          presence: presence === true,
          confirmed: false,
          learned: false,
          waiters: [],
        };
        this.#channels.set(channel, entry);
        this.#channelsChanged(() => this.#sendSubscribe(channel));
      }
      entry.waiters.push({ resolve, reject });
    });
    // The application may not wait for it; a refusal is also an `error` event.
    promise.catch(() => {});
    return promise;
  }

  /** Removes `channel`: none of its messages are delivered after this call. */
  unsubscribe(channel) {
    const entry = this.#channels.get(channel);
    if (!entry) return;
    this.#channels.delete(channel);
    this.#settle(entry, null, new Error(`unsubscribed from ${channel}`));
    this.#channelsChanged(() => {
      this.#transport.send({ unsubscribe: channel });
      this.#pending.add({ kind: "unsubscribe", channel });
    });
  }

  /**
   * Publishes `data` (a string) to `channel` as the token's `pub` claim allows: over
   * the WebSocket, or on SSE and long-poll as `POST /pub/<channel>?token=…` (a client
   * publish over HTTP); resolves to the server's counts {connections, users}. Never
   * resent after a lost connection (it may or may not have been done): rejected instead.
   */
  publish(channel, data) {
    if (typeof channel !== "number" && !/^[0-9]+$/.test(channel)) checkChannel(channel);
    const target = typeof channel === "number" || /^[0-9]+$/.test(channel) ? Number(channel) : channel;
    if (typeof data !== "string") return Promise.reject(new TypeError("publish data must be a string"));
    if (this.#state === "closed") return Promise.reject(new Error("the client was closed"));
    return new Promise((resolve, reject) => {
      const request = { kind: "publish", channel: target, data, resolve, reject };
      if (this.#transport?.opened) this.#sendPublish(request);
      else this.#waitingPublishes.push(request);
    });
  }

  /**
   * Gets a new token from `getToken` now: a WebSocket sends it as `{"refresh":…}` (the
   * connection stays; resolves to the server's `{valid_until}`, rejects when refused),
   * an EventSource reconnects with it, a long-poll uses it from its next request.
   */
  async refreshToken() {
    if (!this.#getToken) throw new Error("refreshToken needs the getToken option");
    this.#token = await this.#getToken();
    const t = this.#transport;
    if (!t?.opened) return undefined;
    if (t.kind === "sse") this.#restart();
    if (t.kind !== "websocket") return undefined;
    return new Promise((resolve, reject) => {
      t.send({ refresh: this.#token });
      this.#pending.add({ kind: "refresh", resolve, reject });
    });
  }

  /**
   * `GET /presence/<channel>`: {channel, users: [{user, connections, info?}], count,
   * connections, cut}. Asked with the client's token (`Authorization: Bearer`, which
   * a cross-origin page can send only where the server answers its preflight: ask
   * from the page's own origin, or have the back-end ask).
   */
  async presence(channel, { signal } = {}) {
    checkChannel(channel);
    const token = this.#token ?? (this.#getToken ? await this.#getToken() : null);
    const headers = token ? { authorization: `Bearer ${token}` } : {};
    const url = httpUrl(this.#base, `/presence/${channel}`, []);
    const res = await this.#options.fetch(url, { cache: "no-store", headers, signal });
    const body = await res.text();
    if (!res.ok) throw new Error(`presence of ${channel}: ${res.status} ${body}`);
    return JSON.parse(body);
  }

  /** `GET /history/<channel>`: {channel, messages: [{seq, data}], pos, gap}. */
  async history(channel, { since, limit, signal } = {}) {
    checkChannel(channel);
    const token = this.#token ?? (this.#getToken ? await this.#getToken() : null);
    const url = httpUrl(this.#base, `/history/${channel}`, [
      ["since", since],
      ["limit", limit],
      ["token", token],
    ]);
    const res = await this.#options.fetch(url, { cache: "no-store", signal });
    const body = await res.text();
    if (!res.ok) throw new Error(`history of ${channel}: ${res.status} ${body}`);
    return { channel, ...JSON.parse(body) };
  }

  // --- the connection loop ------------------------------------------------------

  /** The next attempt in `delay` ms. */
  #next(delay) {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#connectNow(), delay);
  }

  async #connectNow() {
    const attempt = ++this.#attempt;
    if (this.#getToken) {
      try {
        this.#token = await this.#getToken();
      } catch (e) {
        if (attempt !== this.#attempt || this.#state === "closed") return;
        this.#emitError("token", `getToken failed: ${e?.message ?? e}`);
        this.#failures += 1;
        this.#next(backoffDelay(this.#failures, this.#options.backoff));
        return;
      }
    }
    const kind = this.#kinds[this.#index];
    await this.#learnPositions(kind);
    if (attempt !== this.#attempt || this.#state === "closed") return;
    this.#open(kind);
  }

  /**
   * SSE and long-poll learn a channel's position only with a message (or the first
   * answer): a quiet channel whose connection drops before that would resume "from
   * now" and miss what was published meanwhile. So a new channel with no position gets
   * one from its history before its first connection opens — only then: later, the
   * history's newest position would skip what the reconnect must replay. A channel
   * that does not exist yet has no position to give. The WebSocket is told its
   * position in `subscribed`.
   */
  async #learnPositions(kind) {
    if (kind === "websocket") return;
    const quiet = [...this.#channels].filter(([, entry]) => entry.pos === null && !entry.learned);
    for (const [, entry] of quiet) entry.learned = true;
    await Promise.all(
      quiet.map(async ([channel]) => {
        try {
          const signal = AbortSignal.timeout(this.#options.openTimeout);
          const { pos } = await this.history(channel, { limit: 1, signal });
          const entry = this.#channels.get(channel);
          if (entry && entry.pos === null) entry.pos = Position.parse(pos);
        } catch {
          // Unreachable or refused: the connection attempt that follows reports it,
          // and the channel starts from now.
        }
      }),
    );
  }

  #open(kind) {
    const streams = [...(this.#userStream ? [USER] : []), ...this.#channels.keys()];
    const positionOf = (s) => this.#stream(s)?.pos ?? null;
    const ctx = {
      ...this.#options,
      base: this.#base,
      user: this.#user,
      streams,
      channels: streams.filter((s) => s !== USER),
      presence: [...this.#channels.values()].some((e) => e.presence),
      since: composite(streams, positionOf),
      userSince: this.#userStream?.pos?.toString() ?? null,
      token: () => this.#token,
    };
    let t = null;
    const live = (fn) => (...args) => {
      if (t === this.#transport) fn(...args);
    };
    t = new TRANSPORTS[kind](ctx, {
      open: live(() => this.#handleOpen(t, streams)),
      closed: live((how) => this.#handleClosed(t, how)),
      message: live((s, epoch, seq, data, subject) => this.#handleMessage(s, epoch, seq, data, subject)),
      advance: live((s, pos) => this.#handleAdvance(s, pos)),
      subscribed: live((c, pos, gap) => this.#handleSubscribed(c, pos, gap)),
      userPosition: live((pos, gap) => this.#handleUserPosition(pos, gap)),
      gap: live((s, info) => this.#handleGap(s, info)),
      refused: live((c, why) => this.#handleRefused(c, why)),
      presence: live((c, change) => this.#handlePresence(c, change)),
      friends: live((change) => this.#handleFriends(change)),
      reply: live((frame) => this.#handleReply(frame)),
      error: live((kind, message) => this.#emitError(kind, message)),
    });
    this.#transport = t;
    t.start();
  }

  /** Reopens the same kind of transport with the current channels (SSE, long-poll). */
  async #restart() {
    const t = this.#transport;
    t.close();
    this.#transport = null;
    for (const entry of this.#channels.values()) entry.confirmed = false;
    const attempt = ++this.#attempt;
    await this.#learnPositions(t.kind);
    if (attempt !== this.#attempt || this.#state === "closed") return;
    this.#open(t.kind);
  }

  /**
   * The channels changed: a WebSocket sends `send` as a control frame once open; an
   * EventSource or long-poll is reopened with the new list (once for all the changes
   * made in one turn of the event loop).
   */
  #channelsChanged(send) {
    const t = this.#transport;
    if (!t) return;
    if (t.kind === "websocket") {
      if (t.opened) send();
      return;
    }
    if (this.#restartQueued) return;
    this.#restartQueued = true;
    queueMicrotask(() => {
      this.#restartQueued = false;
      if (this.#transport && this.#transport.kind !== "websocket") this.#restart();
    });
  }

  #handleOpen(t, streams) {
    // A reopen for new channels (#restart) is no new connection to the application.
    const reopened = this.#state === "connected";
    this.#state = "connected";
    this.#failures = 0;
    this.#roundStart = this.#index;
    if (!reopened) this.#events.emit("connected", { transport: t.kind });
    if (t.kind === "websocket") {
      for (const channel of this.#channels.keys()) this.#sendSubscribe(channel);
    } else {
      for (const s of streams) {
        const entry = this.#channels.get(s);
        if (entry && !entry.confirmed) this.#confirm(s, entry, false);
      }
    }
    for (const request of this.#waitingPublishes.splice(0)) this.#sendPublish(request);
  }

  #handleClosed(t, { opened, retry, why }) {
    this.#transport = null;
    for (const entry of this.#channels.values()) entry.confirmed = false;
    this.#pending.failAll(new Error(`connection lost (${why}); a publish may or may not have been done`));
    this.#state = "connecting";
    if (opened) {
      this.#events.emit("disconnected", { transport: t.kind, reason: why });
      this.#failures = 0;
      const delay =
        retry === "now" ? Math.random() * RESUME_SPREAD : backoffDelay(0, this.#options.backoff);
      this.#next(delay);
      return;
    }
    this.#emitError("connect", `${t.kind}: ${why}`, { transport: t.kind });
    const next = (this.#index + 1) % this.#kinds.length;
    if (next !== this.#roundStart) {
      // Fall back to the next transport at once.
      this.#index = next;
      this.#next(0);
      return;
    }
    // Every transport failed: wait, then start again from the preferred one.
    this.#failures += 1;
    this.#index = this.#roundStart = 0;
    this.#next(backoffDelay(this.#failures, this.#options.backoff));
  }

  /** `subject`: what a message of the user's stream was published to, when told. */
  #handleMessage(stream, epoch, seq, data, subject) {
    const entry = this.#stream(stream);
    // An unsubscribed channel's late messages and a resume's overlap are dropped.
    if (!entry || !isNew(entry.pos, epoch, seq)) return;
    entry.pos = new Position(epoch, seq);
    const pos = entry.pos.toString();
    if (stream !== USER) this.#events.emit("message", { channel: stream, data, pos });
    else if (subject === undefined) this.#events.emit("message", { user: this.#user, data, pos });
    else this.#events.emit("message", { user: this.#user, subject, data, pos });
  }

  /** A position learned without a message: only ever forward. */
  #handleAdvance(stream, pos) {
    const entry = this.#stream(stream);
    if (entry && isNew(entry.pos, pos.epoch, pos.seq)) entry.pos = pos;
  }

  #handleSubscribed(channel, posText, gap) {
    this.#pending.take("subscribe", channel);
    const entry = this.#channels.get(channel);
    if (!entry) return;
    const pos = Position.parse(posText);
    if (gap) {
      entry.pos = pos ? new Position(pos.epoch, null) : null;
      this.#events.emit("gap", { channel, pos: posText });
    } else if (!entry.pos) {
      entry.pos = pos;
    }
    this.#confirm(channel, entry, gap);
  }

  #handleUserPosition(posText, gap) {
    const pos = Position.parse(posText);
    if (gap) {
      this.#userStream.pos = pos;
      this.#events.emit("gap", { user: this.#user, pos: posText });
    } else if (!this.#userStream.pos) {
      this.#userStream.pos = pos;
    }
  }

  #handleGap(stream, { epoch, first }) {
    const entry = this.#stream(stream);
    if (!entry) return;
    entry.pos = new Position(epoch, typeof first === "number" ? first - 1 : null);
    const who = stream === USER ? { user: this.#user } : { channel: stream };
    this.#events.emit("gap", { ...who, epoch, ...(typeof first === "number" ? { first } : {}) });
  }

  /** A channel the token does not allow: dropped, its waiters rejected, an error event. */
  #handleRefused(channel, why) {
    const entry = this.#channels.get(channel);
    this.#emitError("refused", `${channel}: ${why}`, { channel });
    if (!entry) return;
    this.#channels.delete(channel);
    this.#settle(entry, null, new Error(`channel ${channel} refused: ${why}`));
    // SSE and long-poll still name it in their URL: reopen without it.
    if (this.#transport && this.#transport.kind !== "websocket") this.#channelsChanged(() => {});
  }

  /** A WebSocket answer to a publish, an unsubscribe, or an error. */
  /** A join or leave in `channel`: told when the application asked for them. */
  #handlePresence(channel, change) {
    if (!this.#channels.get(channel)?.presence) return;
    if (typeof change?.joined === "number") this.#events.emit("presence", { channel, joined: change.joined });
    else if (typeof change?.left === "number") this.#events.emit("presence", { channel, left: change.left });
  }

  /** Who of those the user follows came online or went offline (`friends: true`). */
  #handleFriends(change) {
    const ids = (v) => (Array.isArray(v) ? v.filter((id) => typeof id === "number") : []);
    const event = { online: ids(change?.online), offline: ids(change?.offline) };
    if (change?.cut === true) event.cut = true;
    this.#events.emit("friends", event);
  }

  #handleReply(frame) {
    if ("published" in frame) {
      this.#pending.take("publish")?.resolve(frame.published);
    } else if ("refreshed" in frame) {
      this.#pending.take("refresh")?.resolve(frame.refreshed);
    } else if ("unsubscribed" in frame) {
      this.#pending.take("unsubscribe", frame.unsubscribed);
    } else if ("error" in frame) {
      this.#handleErrorFrame(String(frame.error), frame.channel);
    }
  }

  /**
   * An error frame answers the oldest request about its channel (a refused subscribe,
   * a refused publish); without a channel, a refused refresh or the oldest publish.
   */
  #handleErrorFrame(error, channel) {
    if (channel === undefined && error.startsWith("refresh refused")) {
      this.#emitError("refresh", error);
      this.#pending.take("refresh")?.reject(new Error(error));
      return;
    }
    const request =
      channel === undefined ? this.#pending.take("publish") : this.#pending.takeAbout(channel);
    if (request?.kind === "publish") {
      request.reject(new Error(`publish to ${request.channel} refused: ${error}`));
    } else if (request?.kind === "subscribe") {
      this.#handleRefused(channel, error);
    } else {
      this.#emitError("server", error, channel === undefined ? {} : { channel });
    }
  }

  // --- helpers --------------------------------------------------------------------

  #stream(stream) {
    return stream === USER ? this.#userStream : this.#channels.get(stream);
  }

  #sendSubscribe(channel) {
    const { pos, presence } = this.#channels.get(channel);
    const frame = { subscribe: channel };
    if (pos) frame.since = pos.toString();
    if (presence) frame.presence = true;
    this.#transport.send(frame);
    this.#pending.add({ kind: "subscribe", channel });
  }

  #sendPublish(request) {
    if (this.#transport.kind !== "websocket") {
      this.#httpPublish(request);
      return;
    }
    this.#transport.send({ publish: request.channel, data: request.data });
    this.#pending.add(request);
  }

  /**
   * A publish beside an SSE or long-poll transport: `POST /pub/<channel>` with the
   * token in `?token=` and a text/plain body, which keeps it a CORS "simple request"
   * (no preflight), as the EventSource's own URL carries the token. Over HTTP/2 the
   * browser sends it on the EventSource's connection. A 429 (over the rate) or 403
   * (not in the claim) rejects with the server's words, as over the WebSocket.
   */
  async #httpPublish(request) {
    try {
      const token = this.#token ?? (this.#getToken ? await this.#getToken() : null);
      const url = httpUrl(this.#base, `/pub/${request.channel}`, [["token", token]]);
      const res = await this.#options.fetch(url, {
        method: "POST",
        cache: "no-store",
        headers: { "content-type": "text/plain;charset=UTF-8" },
        body: request.data,
      });
      const body = await res.text();
      if (!res.ok) throw new Error(`publish to ${request.channel} refused: ${res.status} ${body.trim()}`);
      request.resolve(JSON.parse(body));
    } catch (e) {
      request.reject(e);
    }
  }

  #confirm(channel, entry, gap) {
    entry.confirmed = true;
    this.#settle(entry, { channel, pos: entry.pos?.toString() ?? null, gap }, null);
    this.#events.emit("subscribed", { channel, pos: entry.pos?.toString() ?? null, gap });
  }

  #settle(entry, value, error) {
    for (const w of entry.waiters.splice(0)) {
      if (error) w.reject(error);
      else w.resolve(value);
    }
  }

  #emitError(kind, message, extra = {}) {
    this.#events.emit("error", { kind, message, ...extra });
  }
}
