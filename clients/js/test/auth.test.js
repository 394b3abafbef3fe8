// A server with JWT: the token comes from getToken before each connection, its `chan`
// claim refuses a channel (an error event; the others go on), its `pub` claim lets the
// WebSocket publish to some channels only, and refreshToken hands a new token over.

import { test } from "node:test";
import assert from "node:assert/strict";
import { JWT_SECRET, Server, client, record, token, until } from "./harness.js";

const CLAIMS = { sub: "7", chan: ["room:*", "news"], pub: ["room:*"] };

test("getToken, a refused channel, publish as the pub claim allows, refresh", async () => {
  const server = await Server.start(["--jwt-secret", JWT_SECRET]);
  let tokens = 0;
  const getToken = async () => {
    tokens += 1;
    return token(CLAIMS);
  };
  const c = client(server, { getToken });
  try {
    const got = record(c);
    c.connect();
    await c.subscribe("room:1");
    assert.equal(tokens, 1, "one token for one connection");
    await assert.rejects(c.subscribe("secret"), /refused/);
    assert.deepEqual(
      got.errors.map((e) => [e.kind, e.channel]),
      [["refused", "secret"]],
    );
    assert.deepEqual(c.channels, ["room:1"]);

    const counts = await c.publish("room:1", "hello");
    assert.equal(counts.connections, 1);
    await assert.rejects(c.publish("news", "not allowed"), /refused/);
    await until(() => got.messages["room:1"]?.length === 1, () => JSON.stringify(got));

    const refreshed = await c.refreshToken();
    assert.equal(tokens, 2);
    assert.equal(typeof refreshed.valid_until, "number");
    await c.publish("room:1", "after refresh");
    await until(() => got.messages["room:1"]?.length === 2, () => JSON.stringify(got));
    assert.deepEqual(got.messages["room:1"], ["hello", "after refresh"]);
    assert.deepEqual(got.errors.length, 1, JSON.stringify(got.errors));
  } finally {
    c.close();
    await server.stop();
  }
});

for (const kind of ["sse", "longpoll"]) {
  test(`${kind}: the token in the URL, a refused channel, publish over HTTP`, async () => {
    const server = await Server.start(["--jwt-secret", JWT_SECRET, "--poll-timeout", "2"]);
    const c = client(server, { transports: [kind], getToken: () => token(CLAIMS) });
    try {
      const got = record(c);
      c.connect();
      c.subscribe("secret");
      await c.subscribe("news");
      await until(() => got.errors.length === 1, () => JSON.stringify(got));
      assert.deepEqual(
        got.errors.map((e) => [e.kind, e.channel]),
        [["refused", "secret"]],
      );
      await server.publish("news", "one");
      await until(() => got.messages.news?.length === 1, () => JSON.stringify(got));
      assert.deepEqual(c.channels, ["news"]);
      // Publish over HTTP with the client's own token, as its pub claim allows.
      await c.subscribe("room:1"); // the chan claim allows room:*
      const counts = await c.publish("room:1", "over http");
      // A long-poll may briefly hold its old request beside the new one.
      assert.ok(counts.connections >= 1, JSON.stringify(counts));
      await until(() => got.messages["room:1"]?.length === 1, () => JSON.stringify(got));
      assert.deepEqual(got.messages["room:1"], ["over http"]);
      await assert.rejects(c.publish("news", "not in pub"), /refused: 403 token does not allow publishing to news/);
    } finally {
      c.close();
      await server.stop();
    }
  });
}
