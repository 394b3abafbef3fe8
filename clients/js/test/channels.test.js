// Several channels on one connection, over each transport forced in turn: messages
// arrive once and in order per channel, a channel added or removed while messages
// flow changes what arrives and loses nothing of the others.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Server, client, record, until } from "./harness.js";

for (const kind of ["websocket", "sse", "longpoll"]) {
  test(`several channels on one ${kind} connection`, async () => {
    const server = await Server.start(["--poll-timeout", "2"]);
    const c = client(server, { transports: [kind] });
    try {
      const got = record(c);
      c.connect();
      await Promise.all([c.subscribe("room:1"), c.subscribe("news")]);
      assert.equal(c.transport, kind);
      for (let i = 1; i <= 5; i++) {
        await server.publish("room:1", `r${i}`);
        await server.publish("news", `n${i}\nsecond line`);
      }
      const count = (ch) => got.messages[ch]?.length ?? 0;
      await until(() => count("room:1") === 5 && count("news") === 5, () => JSON.stringify(got));

      // A channel added while another one's messages are published: on SSE and
      // long-poll the connection is reopened, resuming room:1 and news.
      const added = c.subscribe("room:2");
      await server.publish("room:1", "r6");
      await added;
      await server.publish("room:2", "x1");
      await server.publish("news", "n6\nsecond line");
      await until(() => count("room:2") === 1 && count("news") === 6 && count("room:1") === 6, () => JSON.stringify(got));

      c.unsubscribe("news");
      await server.publish("news", "n7\nsecond line");
      await server.publish("room:2", "x2");
      await until(() => count("room:2") === 2, () => JSON.stringify(got));

      assert.deepEqual(got.messages["room:1"], ["r1", "r2", "r3", "r4", "r5", "r6"]);
      assert.deepEqual(
        got.messages.news,
        [1, 2, 3, 4, 5, 6].map((i) => `n${i}\nsecond line`),
      );
      assert.deepEqual(got.messages["room:2"], ["x1", "x2"]);
      assert.deepEqual(c.channels, ["room:1", "room:2"]);
      assert.match(c.position("room:1"), /^\d+-6$/);
      assert.deepEqual(got.gaps, []);
      assert.deepEqual(got.errors, []);
    } finally {
      c.close();
      await server.stop();
    }
  });
}
