// The long-poll transport: one request at a time for a fixed list of streams, each
// answer's composite `since` the start of the next. It is open once the first answer
// came; a change of channels is a new transport that polls from the same positions.

import { USER, splitComposite } from "../positions.js";
import { subscriptionPath, httpUrl } from "../url.js";

export class LongPollTransport {
  kind = "longpoll";
  opened = false;
  #ctx;
  #sink;
  #abort = null;
  #done = false;

  constructor(ctx, sink) {
    this.#ctx = ctx;
    this.#sink = sink;
  }

  start() {
    if (this.#ctx.friends) {
      // The server refuses `friends=1` on a long-poll: poll without it, and say so.
      queueMicrotask(() => this.#sink.error("unsupported", "friends events need WebSocket or SSE; long-poll has none"));
    }
    if (this.#ctx.streams.length === 0) {
      queueMicrotask(() => this.#open());
      return;
    }
    if (typeof this.#ctx.fetch !== "function") {
      queueMicrotask(() => this.#end("backoff", "no fetch function (pass options.fetch)"));
      return;
    }
    this.#poll(this.#ctx.since);
  }

  /** Ends the polling without telling the sink; a request under way is aborted. */
  close() {
    this.#done = true;
    this.#abort?.abort();
  }

  async #poll(since) {
    const { base, user, channels, token, fetch, requestTimeout } = this.#ctx;
    while (!this.#done) {
      const url = httpUrl(base, subscriptionPath("poll", user), [
        ...channels.map((c) => ["channel", c]),
        ["since", since],
        ["token", token()],
      ]);
      const abort = (this.#abort = new AbortController());
      const timer = setTimeout(() => abort.abort(), requestTimeout);
      let answer;
      try {
        const res = await fetch(url, { signal: abort.signal, cache: "no-store" });
        if (res.status === 401) return this.#end("token", `long-poll refused: 401 ${await res.text()}`);
        if (!res.ok) return this.#end("backoff", `long-poll answered ${res.status}: ${await res.text()}`);
        answer = await res.json();
      } catch (e) {
        return this.#end("backoff", `long-poll failed: ${e.message}`);
      } finally {
        clearTimeout(timer);
      }
      if (this.#done) return;
      this.#deliver(answer);
      since = answer.since ?? since;
    }
  }

  /**
   * One answer: refusals first (so the first answer confirms only the channels taken),
   * then the transport is open, then gaps and messages in the order they must be seen.
   */
  #deliver(answer) {
    const { streams, channels, user } = this.#ctx;
    const parts = splitComposite(answer.since);
    const epochOf = (stream) => parts[streams.indexOf(stream)]?.epoch ?? answer.epoch;
    // `"user"` names the user's stream, unless a channel of that name is polled too.
    const streamOf = (name) => (name === "user" && user != null && !channels.includes("user") ? USER : name);
    for (const r of answer.refused ?? []) this.#sink.refused(r.channel, r.error);
    this.#open();
    if (this.#done) return;
    for (const name of answer.gaps ?? []) {
      const stream = streamOf(name);
      this.#sink.gap(stream, { epoch: epochOf(stream) });
    }
    for (const m of answer.messages ?? []) {
      const stream = "channel" in m ? m.channel : USER;
      this.#sink.message(stream, epochOf(stream), m.seq, m.data, m.subject);
    }
    streams.forEach((s, i) => parts[i] && this.#sink.advance(s, parts[i]));
  }

  #open() {
    if (this.#done || this.opened) return;
    this.opened = true;
    this.#sink.open();
  }

  #end(retry, why) {
    if (this.#done) return;
    this.#done = true;
    this.#sink.closed({ opened: this.opened, retry, why });
  }
}
