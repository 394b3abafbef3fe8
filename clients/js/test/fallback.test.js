// Falling back when a transport cannot open: a WebSocket (and then an EventSource)
// whose connections are refused, as a proxy that blocks them would, leaves the client
// on SSE (then long-poll), where messages still arrive.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import WebSocket from "ws";
import { EventSource } from "eventsource";
import { Server, client, record, until } from "./harness.js";

/** A loopback port nothing listens on: connections to it are refused. */
async function closedPort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

const redirect = (url, port) => url.replace(/\/\/[^/]+/, `//127.0.0.1:${port}`);

test("a refused WebSocket falls back to SSE, a refused EventSource to long-poll", async () => {
  const server = await Server.start(["--poll-timeout", "2"]);
  const port = await closedPort();
  class BlockedWebSocket extends WebSocket {
    constructor(url) {
      super(redirect(url, port));
    }
  }
  class BlockedEventSource extends EventSource {
    constructor(url) {
      super(redirect(url, port));
    }
  }
  const viaSse = client(server, { WebSocket: BlockedWebSocket });
  const viaPoll = client(server, { WebSocket: BlockedWebSocket, EventSource: BlockedEventSource });
  try {
    const got = [record(viaSse), record(viaPoll)];
    for (const c of [viaSse, viaPoll]) {
      c.connect();
      await c.subscribe("news");
    }
    assert.equal(viaSse.transport, "sse");
    assert.equal(viaPoll.transport, "longpoll");
    await server.publish("news", "one");
    await server.publish("news", "two");
    await until(() => got.every((g) => g.messages.news?.length === 2), () => JSON.stringify(got));
    for (const g of got) assert.deepEqual(g.messages.news, ["one", "two"]);
    assert.deepEqual(
      got[1].errors.map((e) => [e.kind, e.transport]),
      [["connect", "websocket"], ["connect", "sse"]],
    );
    // Publish beside SSE goes over HTTP (here without a token: a loopback peer of a
    // server without --api-key publishes as a back-end does).
    const counts = await viaSse.publish("news", "three");
    assert.ok(counts.connections >= 2, JSON.stringify(counts));
    await until(() => got.every((g) => g.messages.news?.length === 3), () => JSON.stringify(got));
  } finally {
    viaSse.close();
    viaPoll.close();
    await server.stop();
  }
});
