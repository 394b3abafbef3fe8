// A cut between client and server (a loopback proxy that severs every connection and
// refuses new ones for a while), on each transport: what was published to channels
// during the cut arrives after it, once and in order, though no message arrived
// before the cut to say where they stood (their positions came from `subscribed`, the
// first long-poll answer, or on SSE the channels' history).

import { test } from "node:test";
import assert from "node:assert/strict";
import { createConnection, createServer } from "node:net";
import { Server, client, record, until, sleep } from "./harness.js";

/** A TCP proxy on a loopback port to `target` ("host:port") that can be cut. */
class Proxy {
  #sockets = new Set();
  #server = null;

  constructor(target) {
    const [host, port] = target.split(":");
    this.target = { host, port: Number(port) };
  }

  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  async listen(port = 0) {
    this.#server = createServer((down) => {
      const up = createConnection(this.target);
      for (const s of [down, up]) {
        this.#sockets.add(s);
        s.on("close", () => this.#sockets.delete(s));
        s.on("error", () => {});
      }
      down.pipe(up).pipe(down);
    });
    await new Promise((r) => this.#server.listen(port, "127.0.0.1", r));
    this.port = this.#server.address().port;
  }

  /** Severs every connection; new ones are refused until listen() again. */
  async cut() {
    const closed = new Promise((r) => this.#server.close(r));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }
}

for (const kind of ["websocket", "sse", "longpoll"]) {
  test(`${kind}: a cut loses nothing of channels quiet before it`, async () => {
    const server = await Server.start(["--poll-timeout", "2"]);
    const proxy = new Proxy(server.addr);
    await proxy.listen();
    const c = client({ base: proxy.base }, { transports: [kind] });
    try {
      const got = record(c);
      const shown = () => JSON.stringify(got);
      let disconnects = 0;
      c.on("disconnected", () => (disconnects += 1));
      // History kept from before the subscription: not for this client.
      await server.publish("quiet", "q0");
      await server.publish("busy", "b0");
      c.connect();
      await Promise.all([c.subscribe("busy"), c.subscribe("quiet")]);

      // Nothing arrived yet: each position came from `subscribed`, the first
      // long-poll answer, or (SSE) the channel's history.
      await proxy.cut();
      await until(() => disconnects === 1, () => `disconnects ${disconnects}`);
      await server.publish("quiet", "q1");
      await server.publish("busy", "b1");
      await sleep(300); // at least one refused reconnect
      await proxy.listen(proxy.port);
      await until(() => c.state === "connected", () => c.state);
      await server.publish("quiet", "q2");
      await until(() => got.messages.quiet?.length >= 2 && got.messages.busy?.length >= 1, shown);
      await sleep(200); // a duplicate would arrive now
      assert.deepEqual(got.messages, { busy: ["b1"], quiet: ["q1", "q2"] });
      assert.deepEqual(got.gaps, []);
    } finally {
      c.close();
      await proxy.cut();
      await server.stop();
    }
  });
}
