// Real Pusher clients against a running myriad, one scenario per run, driven by
// crates/myriad/tests/pusher_*.rs: `node client.mjs <scenario> <host:port> <id> <key> <secret>`.
// Prints one JSON line per thing observed; the Rust test reads them (and answers on
// stdin when a scenario waits for it). pusher-js and the `pusher` server SDK are used
// as an app would: the SDK's authorizeChannel signs subscriptions (the app's auth
// endpoint, in process). Every wait is bounded.
import Pusher from "pusher-js";
import Echo from "laravel-echo";
import PusherServer from "pusher";
import WebSocket from "ws";
import readline from "node:readline";

const [scenario, hostport, appId, key, secret] = process.argv.slice(2);
// The SDK talks to `hostport` (the webhook scenario gets its server later).
const [host, port] = hostport.split(":");
const say = (o) => console.log(JSON.stringify(o));
const lines = readline.createInterface({ input: process.stdin });
const nextLine = () => new Promise((res) => lines.once("line", res));
setTimeout(() => {
  say({ error: "timed out" });
  process.exit(2);
}, 20000).unref();

const sdk = (s = secret) => new PusherServer({ appId, key, secret: s, host, port, useTLS: false });

// A pusher-js client whose auth endpoint is the SDK with `authSecret` (signing
// `member`, `{user_id, user_info}`, for presence channels).
function client(authSecret = secret, options = {}, member = undefined) {
  const signer = sdk(authSecret);
  return new Pusher(key, {
    wsHost: host,
    wsPort: Number(port),
    forceTLS: false,
    enabledTransports: ["ws"],
    disableStats: true,
    cluster: "mt1",
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) =>
        callback(null, signer.authorizeChannel(socketId, channelName, member)),
    },
    ...options,
  });
}

const connected = (p) =>
  new Promise((res, rej) => {
    p.connection.bind("connected", () => res(p.connection.socket_id));
    p.connection.bind("failed", () => rej(new Error("failed")));
  });

const subscribed = (ch) =>
  new Promise((res) => {
    ch.bind("pusher:subscription_succeeded", () => res({ ok: true }));
    ch.bind("pusher:subscription_error", (e) => res({ ok: false, error: e }));
  });

// A raw WebSocket: what the server says first, and to a ping.
function raw(path) {
  return new Promise((res) => {
    const ws = new WebSocket(`ws://${hostport}${path}`);
    const got = [];
    ws.on("message", (m) => {
      const e = JSON.parse(m.toString());
      got.push(e);
      if (e.event === "pusher:connection_established") {
        ws.send(JSON.stringify({ event: "pusher:ping", data: {} }));
      }
      if (e.event === "pusher:pong") ws.close();
    });
    ws.on("close", (code) => res({ code, events: got }));
    ws.on("error", () => {});
  });
}

async function main() {
  switch (scenario) {
    case "connect": {
      const p = client();
      say({ socket_id: await connected(p) });
      say({ raw: await raw(`/app/${key}?protocol=7&client=js&version=8.4.0`) });
      say({ unknown_key: await raw(`/app/nope?protocol=7`) });
      say({ old_protocol: await raw(`/app/${key}?protocol=6`) });
      p.disconnect();
      break;
    }
    case "public": {
      // Subscribe; the test publishes on myriad's own API; print what arrives.
      const p = client();
      await connected(p);
      const ch = p.subscribe("news");
      say({ subscribed: await subscribed(ch) });
      const got = new Promise((res) => ch.bind("message", (d) => res(d)));
      say({ received: await got });
      p.disconnect();
      break;
    }
    case "private": {
      const good = client();
      await connected(good);
      say({ good: await subscribed(good.subscribe("private-a")) });
      const bad = client("not-the-secret");
      await connected(bad);
      say({ bad: await subscribed(bad.subscribe("private-a")) });
      const unsigned = client(secret, {
        channelAuthorization: {
          customHandler: (_p, cb) => cb(null, { auth: "" }),
        },
      });
      await connected(unsigned);
      say({ unsigned: await subscribed(unsigned.subscribe("private-b")) });
      for (const p of [good, bad, unsigned]) p.disconnect();
      break;
    }
    case "client-events": {
      // A sends client-hello twice; B must get both; A must get neither. Then A
      // tries a public channel (refused).
      const a = client();
      const b = client();
      await Promise.all([connected(a), connected(b)]);
      const ca = a.subscribe("private-room");
      const cb = b.subscribe("private-room");
      await Promise.all([subscribed(ca), subscribed(cb)]);
      const echoed = [];
      ca.bind("client-hello", (d) => echoed.push(d));
      const got = [];
      const both = new Promise((res) =>
        cb.bind("client-hello", (d) => {
          got.push(d);
          if (got.length === 2) res();
        }),
      );
      ca.trigger("client-hello", { n: 1 });
      ca.trigger("client-hello", { n: 2 });
      await both;
      // Anything echoed to A would have arrived by now (same server, same order)
      // or after a marker B sends A.
      const marker = new Promise((res) => ca.bind("client-marker", res));
      cb.trigger("client-marker", {});
      await marker;
      say({ received: got, echoed });
      for (const p of [a, b]) p.disconnect();
      break;
    }
    case "api": {
      // The server SDK triggers on "news" (the test's SSE subscriber sees it too);
      // pusher-js gets it. Then a wrong secret and an old timestamp are refused.
      const p = client();
      const socket = await connected(p);
      const ch = p.subscribe("news");
      await subscribed(ch);
      const got = new Promise((res) => ch.bind("greet", res));
      const r = await sdk().trigger(["news", "other"], "greet", { x: 1 });
      say({ trigger: r.status, received: await got });
      // Left out by socket_id: the batch's second event reaches pusher-js, not the first.
      const second = new Promise((res) => ch.bind("second", res));
      const skipped = [];
      ch.bind("first", (d) => skipped.push(d));
      await sdk().triggerBatch([
        { channel: "news", name: "first", data: "1", socket_id: socket },
        { channel: "news", name: "second", data: "2" },
      ]);
      say({ batch: await second, skipped });
      const refused = async (f) => {
        try {
          await f();
          return null;
        } catch (e) {
          return e.status ?? String(e);
        }
      };
      const wrong = await refused(() => sdk("wrong-secret").trigger("news", "x", {}));
      const realNow = Date.now;
      Date.now = () => realNow() - 700_000;
      const old = await refused(() => sdk().trigger("news", "x", {}));
      Date.now = realNow;
      say({ wrong, old });
      p.disconnect();
      break;
    }
    case "presence": {
      // A (user 1) is there; B and B2 (both user 2) arrive; B leaves, then B2. A is
      // told of user 2 once when they arrive and once when the last one leaves.
      const a = client(secret, {}, { user_id: "1", user_info: { name: "a" } });
      await connected(a);
      const ca = a.subscribe("presence-room");
      const first = await new Promise((res) =>
        ca.bind("pusher:subscription_succeeded", (m) => res({ count: m.count, me: m.me })),
      );
      say({ first });
      const added = [];
      const removed = [];
      ca.bind("pusher:member_added", (m) => added.push([m.id, m.info ?? null]));
      const gone = new Promise((res) =>
        ca.bind("pusher:member_removed", (m) => {
          removed.push(m.id);
          res();
        }),
      );
      const two = { user_id: "2", user_info: { name: "b" } };
      const b = client(secret, {}, two);
      await connected(b);
      const cb = b.subscribe("presence-room");
      const seen = await new Promise((res) =>
        cb.bind("pusher:subscription_succeeded", (m) => {
          const ids = [];
          m.each((x) => ids.push([x.id, x.info]));
          res({ count: m.count, members: ids.sort() });
        }),
      );
      const b2 = client(secret, {}, two);
      await connected(b2);
      await subscribed(b2.subscribe("presence-room"));
      // The server SDK's queries, while users 1 and 2 (three connections) are in.
      const get = async (path, params) => {
        try {
          return await (await sdk().get({ path, params })).json();
        } catch (e) {
          return { status: e.status ?? String(e) };
        }
      };
      const channel = await get("/channels/presence-room", {
        info: "user_count,subscription_count",
      });
      const users = await get("/channels/presence-room/users");
      const notPresence = await get("/channels/news/users");
      say({ channel, users, notPresence });
      b.disconnect();
      // A marker through the channel: whatever B's leave announced is before it.
      const marker = new Promise((res) => ca.bind("client-marker", res));
      b2.channel("presence-room").trigger("client-marker", {});
      await marker;
      const removedWhileB2 = [...removed];
      b2.disconnect();
      await gone;
      say({ seen, added, removedWhileB2, removed });
      a.disconnect();
      break;
    }
    case "echo": {
      // Laravel Echo on pusher-js, as a Laravel front-end uses it: listen to a
      // public channel's event, whisper on a private one, join a presence one.
      const echo = (member) =>
        new Echo({
          broadcaster: "pusher",
          key,
          wsHost: host,
          wsPort: Number(port),
          forceTLS: false,
          enabledTransports: ["ws"],
          disableStats: true,
          cluster: "mt1",
          Pusher,
          channelAuthorization: {
            customHandler: ({ socketId, channelName }, cb) =>
              cb(null, sdk().authorizeChannel(socketId, channelName, member)),
          },
        });
      const a = echo({ user_id: 1, user_info: { name: "Ada" } });
      const b = echo({ user_id: 2, user_info: { name: "Bob" } });
      const shipped = new Promise((res) => a.channel("orders").listen(".shipped", res));
      await new Promise((res) => a.channel("orders").subscribed(res));
      await sdk().trigger("orders", "shipped", { id: 7 });
      say({ shipped: await shipped });

      const typing = new Promise((res) => a.private("room").listenForWhisper("typing", res));
      await new Promise((res) => a.private("room").subscribed(res));
      await new Promise((res) => b.private("room").subscribed(res));
      b.private("room").whisper("typing", { who: "Bob" });
      say({ whisper: await typing });

      const here = await new Promise((res) => a.join("chat").here(res));
      const joining = new Promise((res) => a.join("chat").joining(res));
      const leaving = new Promise((res) => a.join("chat").leaving(res));
      const bHere = await new Promise((res) => b.join("chat").here(res));
      const joined = await joining;
      b.leave("chat");
      say({ here, bHere, joined, left: await leaving });
      a.disconnect();
      b.disconnect();
      break;
    }
    case "webhook": {
      // A back-end's webhook receiver: the test starts myriad pointing at it, and
      // sends its address here. A presence member comes and goes; each POST is
      // checked with the SDK's webhook(), and with a wrong secret.
      const http = await import("node:http");
      const posts = [];
      let wanted;
      const all = new Promise((res) => (wanted = res));
      const server = http.createServer((req, resp) => {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
          resp.writeHead(200).end("ok");
          const hook = { headers: req.headers, rawBody: body };
          const w = sdk().webhook(hook);
          posts.push({
            valid: w.isValid(),
            forged: sdk("wrong-secret").webhook(hook).isValid(),
            events: w.isValid() ? w.getEvents() : [],
          });
          const names = posts.flatMap((p) => p.events.map((e) => e.name));
          if (names.includes("channel_vacated")) wanted();
        });
      });
      await new Promise((res) => server.listen(0, "127.0.0.1", res));
      say({ port: server.address().port });
      const [h, p] = (await nextLine()).split(":");
      const member = { user_id: "5", user_info: { name: "e" } };
      const c = new Pusher(key, {
        wsHost: h,
        wsPort: Number(p),
        forceTLS: false,
        enabledTransports: ["ws"],
        disableStats: true,
        cluster: "mt1",
        channelAuthorization: {
          customHandler: ({ socketId, channelName }, cb) =>
            cb(null, sdk().authorizeChannel(socketId, channelName, member)),
        },
      });
      await connected(c);
      await subscribed(c.subscribe("presence-hook"));
      c.disconnect();
      await all;
      say({ posts });
      server.close();
      break;
    }
    case "encrypted": {
      // An end-to-end encrypted channel: the SDK encrypts with the master key,
      // pusher-js decrypts with the shared secret the auth endpoint hands it; the
      // server only passes the payload through. The test's SSE subscriber of the
      // channel sees ciphertext.
      const master = Buffer.alloc(32, 7).toString("base64");
      const signer = new PusherServer({
        appId, key, secret, host, port, useTLS: false, encryptionMasterKeyBase64: master,
      });
      const p = client(secret, {
        channelAuthorization: {
          customHandler: ({ socketId, channelName }, cb) =>
            cb(null, signer.authorizeChannel(socketId, channelName)),
        },
      });
      await connected(p);
      const ch = p.subscribe("private-encrypted-vault");
      say({ subscribed: await subscribed(ch) });
      const got = new Promise((res) => ch.bind("secret", res));
      await signer.trigger("private-encrypted-vault", "secret", { code: 42 });
      say({ received: await got });
      p.disconnect();
      break;
    }
    case "drain": {
      // Connected; the test drains the server. Close 4200 is pusher-js's "retry"
      // action: a WebSocketError naming the code, and a reconnect now. A close
      // below 4000 (such as 1012) has no action: pusher-js only waits a second
      // and retries; 4000-4099 gives up, 4100-4199 backs off.
      const p = client();
      await connected(p);
      say({ connected: true });
      const seen = { states: [], actions: [] };
      p.connection.bind("error", (e) => {
        if (e?.type === "WebSocketError") seen.actions.push(e.error?.data?.code ?? null);
      });
      p.connection.bind("state_change", (s) => {
        seen.states.push(s.current);
        if (s.current !== "connected") {
          say(seen);
          p.disconnect();
          process.exit(0);
        }
      });
      await nextLine();
      break;
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
  process.exit(0);
}

main().catch((e) => {
  say({ error: String(e) });
  process.exit(1);
});
