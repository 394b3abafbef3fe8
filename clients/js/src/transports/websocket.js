// The WebSocket transport in framed mode (`/ws?framed=1`): one connection carries
// every channel, subscribed and unsubscribed with control frames while it is open,
// and client publishes. Each message frame carries its channel's position, so a
// resume is one `{"subscribe":C,"since":pos}` per channel.

import { Position, USER } from "../positions.js";
import { subscriptionPath, wsUrl } from "../url.js";

/** Close codes with their own advice (docs/protocol.md): a drain, an expired token. */
const RESUME_NOW = 1012;
const TOKEN_EXPIRED = 4001;

export class WebSocketTransport {
  kind = "websocket";
  opened = false;
  #ctx;
  #sink;
  #ws = null;
  #timer = null;
  #done = false;

  /** `ctx`: what the client knows of the connection; `sink`: where events go. */
  constructor(ctx, sink) {
    this.#ctx = ctx;
    this.#sink = sink;
  }

  start() {
    const { base, user, userSince, token, WebSocket, openTimeout, friends } = this.#ctx;
    if (typeof WebSocket !== "function") {
      queueMicrotask(() => this.#end("backoff", "no WebSocket constructor (pass options.WebSocket)"));
      return;
    }
    const url = wsUrl(base, subscriptionPath("ws", user), [
      ["framed", "1"],
      ["friends", friends ? "1" : null],
      ["since", userSince],
      ["token", token()],
    ]);
    try {
      this.#ws = new WebSocket(url);
    } catch (e) {
      queueMicrotask(() => this.#end("backoff", `WebSocket: ${e.message}`));
      return;
    }
    this.#timer = setTimeout(() => this.#end("backoff", `WebSocket did not open in ${openTimeout} ms`), openTimeout);
    this.#ws.onopen = () => {
      clearTimeout(this.#timer);
      this.opened = true;
      this.#sink.open();
    };
    this.#ws.onmessage = (e) => this.#frame(e.data);
    // An error is always followed by a close, which says more.
    this.#ws.onerror = () => {};
    this.#ws.onclose = (e) => {
      const retry = e.code === RESUME_NOW ? "now" : e.code === TOKEN_EXPIRED ? "token" : "backoff";
      this.#end(retry, `WebSocket closed (${e.code}${e.reason ? ` ${e.reason}` : ""})`);
    };
  }

  /** Sends one control frame (subscribe, unsubscribe, publish, refresh). */
  send(frame) {
    this.#ws.send(JSON.stringify(frame));
  }

  /** Ends the connection without telling the sink (the client asked for it). */
  close() {
    this.#done = true;
    this.#detach();
  }

  #frame(text) {
    if (typeof text !== "string") {
      this.#sink.error("protocol", "a binary frame in framed mode");
      return;
    }
    let f;
    try {
      f = JSON.parse(text);
    } catch {
      this.#sink.error("protocol", `a frame that is not JSON: ${text.slice(0, 100)}`);
      return;
    }
    if ("friends" in f) {
      this.#sink.friends(f.friends);
    } else if ("presence" in f && "channel" in f) {
      this.#sink.presence(f.channel, f.presence);
    } else if ("data" in f && ("channel" in f || "subject" in f)) {
      const pos = Position.parse(f.pos);
      if (pos === null) {
        this.#sink.error("protocol", `a message without a position: ${text.slice(0, 100)}`);
        return;
      }
      // The user's own deliveries name the subject they were published to.
      const stream = "channel" in f ? f.channel : USER;
      this.#sink.message(stream, pos.epoch, pos.seq, f.data, f.subject);
    } else if ("subscribed" in f) {
      this.#sink.subscribed(f.subscribed, f.pos, f.gap === true);
    } else if ("position" in f) {
      this.#sink.userPosition(f.position, f.gap === true);
    } else {
      this.#sink.reply(f);
    }
  }

  #end(retry, why) {
    if (this.#done) return;
    this.#done = true;
    this.#detach();
    this.#sink.closed({ opened: this.opened, retry, why });
  }

  #detach() {
    clearTimeout(this.#timer);
    const ws = this.#ws;
    if (!ws) return;
    ws.onopen = ws.onmessage = ws.onclose = null;
    // A socket still connecting throws nowhere but may report an error later.
    ws.onerror = () => {};
    try {
      ws.close(1000);
    } catch {
      // Already closing.
    }
  }
}
