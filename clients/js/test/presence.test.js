// Presence through the client: a channel subscribed with `presence: true` tells of
// another user's first connection arriving and last one leaving (over WebSocket and
// SSE), a channel subscribed without it tells nothing, and `presence()` reads who is
// in a channel now.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Server, client, until } from "./harness.js";

for (const kind of ["websocket", "sse"]) {
  test(`joins and leaves of a channel over ${kind}`, async () => {
    // No grace: a leave is told at the router's next tick.
    const server = await Server.start(["--presence-grace", "0"]);
    const watcher = client(server, { transports: [kind], user: 1 });
    const other = client(server, { transports: ["websocket"], user: 42 });
    try {
      const changes = [];
      watcher.on("presence", (p) => changes.push(p));
      watcher.connect();
      await Promise.all([
        watcher.subscribe("room:1", { presence: true }),
        watcher.subscribe("quiet"),
      ]);
      other.connect();
      await Promise.all([other.subscribe("room:1"), other.subscribe("quiet")]);
      await until(() => changes.length >= 1, () => JSON.stringify(changes));
      assert.deepEqual(changes[0], { channel: "room:1", joined: 42 });

      const now = await watcher.presence("room:1");
      assert.equal(now.channel, "room:1");
      assert.equal(now.count, 2);
      assert.deepEqual(
        now.users.map((u) => [u.user, u.connections]),
        [[1, 1], [42, 1]],
      );

      other.close();
      await until(() => changes.length >= 2, () => JSON.stringify(changes));
      assert.deepEqual(changes[1], { channel: "room:1", left: 42 });
      // Nothing of "quiet", which was subscribed without presence.
      assert.ok(changes.every((c) => c.channel === "room:1"), JSON.stringify(changes));
      const after = await watcher.presence("room:1");
      assert.equal(after.count, 1);
    } finally {
      watcher.close();
      other.close();
      await server.stop();
    }
  });
}
