// A connection for a user (`/ws/<id>`, `/sse/<id>`, `/poll/<id>`) carries that user's
// own deliveries beside its channels: the user's stream comes first in the composite
// positions, its messages name the subject they were published to, and both streams
// resume across a cut (the server's connections severed by SIGKILL and a restart
// with durable history).

import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Server, client, record, tempDir, until, sleep } from "./harness.js";

for (const kind of ["websocket", "sse", "longpoll"]) {
  test(`${kind}: the user's own deliveries beside a channel, across a restart`, async () => {
    const [dir, removeDir] = tempDir();
    const server = await Server.start([
      "--store", `sqlite:${join(dir, "myriad.db")}`,
      "--history-store", "store",
      "--poll-timeout", "2",
    ]);
    const c = client(server, { transports: [kind], user: 42 });
    try {
      const got = record(c);
      const user = [];
      c.on("message", (m) => m.user !== undefined && user.push(m));
      c.connect();
      await c.subscribe("room:1");
      await sleep(100); // the user's login is not confirmed by an answer
      await server.publish("42", "u1");
      await server.publish("room:1", "r1");
      await until(() => got.messages["user:42"]?.length === 1 && got.messages["room:1"]?.length === 1, () => JSON.stringify(got));

      await server.killAndRestart();
      await server.publish("42", "u2");
      await server.publish("room:1", "r2");
      await until(() => got.messages["user:42"]?.length === 2 && got.messages["room:1"]?.length === 2, () => JSON.stringify(got), 20000);
      await sleep(200); // a duplicate would arrive now
      assert.deepEqual(got.messages, { "user:42": ["u1", "u2"], "room:1": ["r1", "r2"] });
      assert.deepEqual(got.gaps, []);
      if (kind !== "sse") assert.deepEqual(user.map((m) => m.subject), [42, 42]);
    } finally {
      c.close();
      await server.stop();
      removeDir();
    }
  });
}
