// The page-like scenario: a client shows two channels while the server is killed
// (SIGKILL) and started again. With durable history every message is shown once and
// in order, on each transport; with in-memory history the loss is surfaced as a gap
// per channel instead.

import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Server, client, record, tempDir, until, sleep } from "./harness.js";

const CHANNELS = ["room:1", "room:2"];

/** Publishes `from`..`to` to both channels, alternating. */
async function publishRange(server, from, to) {
  for (let i = from; i <= to; i++) {
    for (const ch of CHANNELS) await server.publish(ch, `${ch}#${i}`);
  }
}

const expected = (ch, n) => Array.from({ length: n }, (_, i) => `${ch}#${i + 1}`);

for (const kind of ["websocket", "sse", "longpoll"]) {
  test(`${kind}: kill -9 and restart with durable history: every message once, in order`, async () => {
    const [dir, removeDir] = tempDir();
    const server = await Server.start([
      "--store", `sqlite:${join(dir, "myriad.db")}`,
      "--history-store", "store",
      "--poll-timeout", "2",
    ]);
    const c = client(server, { transports: [kind] });
    try {
      const got = record(c);
      const shown = () => JSON.stringify(got);
      c.connect();
      await Promise.all(CHANNELS.map((ch) => c.subscribe(ch)));
      await publishRange(server, 1, 10);
      await until(() => CHANNELS.every((ch) => got.messages[ch]?.length === 10), shown);

      await server.killAndRestart();
      // Published before the client is back: it must get them from history.
      await publishRange(server, 11, 20);
      await until(() => c.state === "connected", () => c.state, 20000);
      await publishRange(server, 21, 25);
      await until(() => CHANNELS.every((ch) => got.messages[ch]?.length >= 25), shown, 20000);
      await sleep(300); // a duplicate would arrive now
      for (const ch of CHANNELS) assert.deepEqual(got.messages[ch], expected(ch, 25));
      assert.deepEqual(got.gaps, []);
    } finally {
      c.close();
      await server.stop();
      removeDir();
    }
  });
}

for (const kind of ["websocket", "sse", "longpoll"]) {
  test(`${kind}: kill -9 and restart with in-memory history: a gap event per channel`, async () => {
    const server = await Server.start(["--poll-timeout", "2"]);
    const c = client(server, { transports: [kind] });
    try {
      const got = record(c);
      c.connect();
      await Promise.all(CHANNELS.map((ch) => c.subscribe(ch)));
      await publishRange(server, 1, 3);
      await until(() => CHANNELS.every((ch) => got.messages[ch]?.length === 3), () => JSON.stringify(got));

      await server.killAndRestart();
      await publishRange(server, 4, 4);
      await until(() => got.gaps.length === 2, () => JSON.stringify(got), 20000);
      assert.deepEqual(got.gaps.map((g) => g.channel).sort(), CHANNELS);
      await publishRange(server, 5, 5);
      await until(() => CHANNELS.every((ch) => got.messages[ch]?.length === 5), () => JSON.stringify(got));
      await sleep(200); // a duplicate would arrive now
      for (const ch of CHANNELS) assert.deepEqual(got.messages[ch], expected(ch, 5));
    } finally {
      c.close();
      await server.stop();
    }
  });
}
