// The Server-Sent Events transport: one EventSource for a fixed list of streams (the
// channels are in its URL), so a change of channels is a new EventSource that resumes
// every stream from its position (a composite `since`). The client reconnects itself
// instead of letting the EventSource do it: a reconnect needs the new channel list and
// a fresh token, which the browser's automatic one would not carry.

import { USER, splitComposite } from "../positions.js";
import { subscriptionPath, httpUrl } from "../url.js";

export class SseTransport {
  kind = "sse";
  opened = false;
  #ctx;
  #sink;
  #es = null;
  #timer = null;
  #done = false;

  constructor(ctx, sink) {
    this.#ctx = ctx;
    this.#sink = sink;
  }

  start() {
    const { base, user, streams, channels, presence, friends, since, token, EventSource, openTimeout } = this.#ctx;
    if (streams.length === 0) {
      // Nothing to listen to yet: open as soon as a channel is added.
      queueMicrotask(() => this.#open());
      return;
    }
    if (typeof EventSource !== "function") {
      queueMicrotask(() => this.#end("backoff", "no EventSource constructor (pass options.EventSource)"));
      return;
    }
    const url = httpUrl(base, subscriptionPath("sse", user), [
      ...channels.map((c) => ["channel", c]),
      // Joins and leaves of every channel of the URL; the client tells only those asked.
      ["presence", presence ? "1" : null],
      // Friends online/offline: its own stream, the id's last part (not resumed).
      ["friends", friends ? "1" : null],
      ["since", since],
      ["token", token()],
    ]);
    const es = (this.#es = new EventSource(url));
    this.#timer = setTimeout(() => this.#end("backoff", `EventSource did not open in ${openTimeout} ms`), openTimeout);
    es.onopen = () => this.#open();
    es.onerror = () => this.#end("backoff", "EventSource failed or closed");
    es.addEventListener("message", (e) => this.#message(USER, e));
    for (const c of channels) es.addEventListener(c, (e) => this.#message(c, e));
    es.addEventListener("gap", (e) => {
      const gap = this.#json(e);
      if (gap) this.#sink.gap(gap.channel ?? USER, { epoch: gap.epoch, first: gap.first });
    });
    es.addEventListener("presence", (e) => {
      const change = this.#json(e);
      if (change) this.#sink.presence(change.channel, change);
    });
    es.addEventListener("friends", (e) => {
      const change = this.#json(e);
      if (change) this.#sink.friends(change);
    });
    es.addEventListener("refused", (e) => {
      const refused = this.#json(e);
      if (refused) this.#sink.refused(refused.channel, refused.error);
    });
    es.addEventListener("expired", () => this.#end("token", "token expired"));
    for (const resume of ["reconnect", "drain"]) {
      es.addEventListener(resume, () => this.#end("now", "the server asked to resume elsewhere"));
    }
  }

  /** Ends the EventSource without telling the sink (the client asked for it). */
  close() {
    this.#done = true;
    this.#detach();
  }

  #open() {
    if (this.#done || this.opened) return;
    clearTimeout(this.#timer);
    this.opened = true;
    this.#sink.open();
  }

  /** A message of `stream`: the event id is the composite position after it. */
  #message(stream, e) {
    const { streams } = this.#ctx;
    const parts = splitComposite(e.lastEventId);
    const pos = parts[streams.indexOf(stream)];
    if (!pos) {
      this.#sink.error("protocol", `an SSE message without a position (id ${JSON.stringify(e.lastEventId)})`);
      return;
    }
    // Streams with no message yet learn where they stand from the others' ids.
    streams.forEach((s, i) => s !== stream && parts[i] && this.#sink.advance(s, parts[i]));
    this.#sink.message(stream, pos.epoch, pos.seq, e.data);
  }

  #json(e) {
    try {
      return JSON.parse(e.data);
    } catch {
      this.#sink.error("protocol", `an SSE ${e.type} event that is not JSON: ${e.data}`);
      return null;
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
    if (this.#es) {
      this.#es.onopen = this.#es.onerror = null;
      this.#es.close();
    }
  }
}
