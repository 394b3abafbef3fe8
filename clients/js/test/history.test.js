// A page's first load: history() reads what a channel kept (the newest, or from a
// position, a limited page at a time), then subscribe({since}) continues from the
// position it answered, on each transport, with no gap and no duplicate.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Server, client, record, until, sleep } from "./harness.js";

for (const kind of ["websocket", "sse", "longpoll"]) {
  test(`${kind}: history, then subscribe from its position`, async () => {
    const server = await Server.start(["--poll-timeout", "2"]);
    const c = client(server, { transports: [kind] });
    try {
      for (let i = 1; i <= 5; i++) await server.publish("log", `m${i}`);
      const all = await c.history("log");
      assert.equal(all.channel, "log");
      assert.deepEqual(all.messages.map((m) => [m.seq, m.data]), [[1, "m1"], [2, "m2"], [3, "m3"], [4, "m4"], [5, "m5"]]);
      assert.equal(all.gap, false);
      const epoch = all.pos.split("-")[0];
      assert.equal(all.pos, `${epoch}-5`);

      const newest = await c.history("log", { limit: 2 });
      assert.deepEqual(newest.messages.map((m) => m.data), ["m4", "m5"]);
      const page = await c.history("log", { since: `${epoch}-2`, limit: 2 });
      assert.deepEqual(page.messages.map((m) => m.data), ["m3", "m4"]);
      assert.equal(page.pos, `${epoch}-4`);

      const got = record(c);
      c.connect();
      await c.subscribe("log", { since: page.pos });
      await server.publish("log", "m6");
      await until(() => got.messages.log?.length >= 2, () => JSON.stringify(got));
      await sleep(200); // a duplicate would arrive now
      assert.deepEqual(got.messages.log, ["m5", "m6"]);
      assert.deepEqual(got.gaps, []);
      assert.equal(c.position("log"), `${epoch}-6`);
    } finally {
      c.close();
      await server.stop();
    }
  });
}
