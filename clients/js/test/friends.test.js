// Friends online/offline through the client: a client of user 1 with `friends: true`
// is told when user 42, whom user 1 follows, opens their first connection and closes
// their last (over WebSocket and SSE), and nothing of user 7, whom user 1 does not
// follow; on long-poll, which cannot carry them, the client says so and still polls.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Server, client, until, sleep } from "./harness.js";

/** The back-end's call: `follower` follows `subject` (the server's follower graph). */
async function follow(server, follower, subject) {
  const res = await fetch(`${server.base}/subscriptions/${follower}/${subject}`, { method: "PUT" });
  assert.ok(res.ok, `PUT /subscriptions/${follower}/${subject}: ${res.status} ${await res.text()}`);
}

for (const kind of ["websocket", "sse"]) {
  test(`friends online and offline over ${kind}`, async () => {
    // No grace: an offline is told at the router's next tick.
    const server = await Server.start(["--presence-grace", "0"]);
    const watcher = client(server, { transports: [kind], user: 1, friends: true });
    const friend = client(server, { transports: ["websocket"], user: 42 });
    const stranger = client(server, { transports: ["websocket"], user: 7 });
    try {
      await follow(server, 1, 42);
      const changes = [];
      const errors = [];
      watcher.on("friends", (f) => changes.push(f));
      watcher.on("error", (e) => errors.push(e));
      const connected = new Promise((ok) => watcher.on("connected", ok));
      watcher.connect();
      await connected;
      stranger.connect();
      friend.connect();
      await until(() => changes.length >= 1, () => JSON.stringify(changes));
      assert.deepEqual(changes[0], { online: [42], offline: [] });

      friend.close();
      await until(() => changes.length >= 2, () => JSON.stringify(changes));
      assert.deepEqual(changes[1], { online: [], offline: [42] });
      stranger.close();
      // A tick and more: nothing is told of the stranger.
      await sleep(1500);
      assert.equal(changes.length, 2, JSON.stringify(changes));
      assert.deepEqual(errors, []);
    } finally {
      watcher.close();
      friend.close();
      stranger.close();
      await server.stop();
    }
  });
}

test("friends on long-poll: an unsupported error, and the user's messages still arrive", async () => {
  const server = await Server.start();
  const watcher = client(server, { transports: ["longpoll"], user: 1, friends: true });
  try {
    const errors = [];
    const messages = [];
    watcher.on("error", (e) => errors.push(e));
    watcher.on("message", (m) => messages.push(m.data));
    watcher.connect();
    await until(() => errors.length >= 1, () => JSON.stringify(errors));
    assert.equal(errors[0].kind, "unsupported");
    // Published until one arrives: the first poll may not have reached the server yet.
    while (messages.length === 0) {
      const res = await fetch(`${server.base}/pub/1`, { method: "POST", body: "hello" });
      assert.ok(res.ok);
      await sleep(300);
    }
    assert.ok(messages.every((m) => m === "hello"), JSON.stringify(messages));
    assert.ok(errors.every((e) => e.kind === "unsupported"), JSON.stringify(errors));
  } finally {
    watcher.close();
    await server.stop();
  }
});

test("friends without a user is refused at construction", () => {
  assert.throws(() => client({ base: "http://127.0.0.1:1" }, { friends: true }), /friends: true needs options.user/);
});
