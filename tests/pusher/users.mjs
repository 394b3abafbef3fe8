// Pusher users and apps against a running myriad, one scenario per run, driven by
// crates/myriad/tests/pusher_users.rs:
// `node users.mjs <scenario> <host:port> <id> <key> <secret> [<id2> <key2> <secret2>]`.
// Real pusher-js and the `pusher` server SDK, as an app uses them: the SDK signs
// sign-ins (authenticateUser) and subscriptions (authorizeChannel) in process.
// Prints one JSON line per thing observed. Every wait is bounded.
import Pusher from "pusher-js";
import PusherServer from "pusher";
import WebSocket from "ws";
import readline from "node:readline";
import http from "node:http";

const [scenario, hostport, appId, key, secret, appId2, key2, secret2] = process.argv.slice(2);
let [host, port] = hostport.split(":");
const lines = readline.createInterface({ input: process.stdin });
const nextLine = () => new Promise((res) => lines.once("line", res));
const say = (o) => console.log(JSON.stringify(o));
// The step a scenario is at, printed if it times out.
let step = "start";
setTimeout(() => {
  say({ error: `timed out at ${step}` });
  process.exit(2);
}, 20000).unref();

const sdk = (id = appId, k = key, s = secret) =>
  new PusherServer({ appId: id, key: k, secret: s, host, port, useTLS: false });

// A pusher-js client of app `k`/`s`: presence members are `member`, sign-in is
// as `user` (`{id, user_info}`).
function client({ k = key, s = secret, member, user } = {}) {
  const signer = sdk(appId, k, s);
  return new Pusher(k, {
    wsHost: host,
    wsPort: Number(port),
    forceTLS: false,
    enabledTransports: ["ws"],
    disableStats: true,
    cluster: "mt1",
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, cb) =>
        cb(null, signer.authorizeChannel(socketId, channelName, member)),
    },
    userAuthentication: {
      customHandler: ({ socketId }, cb) => cb(null, signer.authenticateUser(socketId, user)),
    },
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

// Connected and signed in: the user_data pusher-js holds after signin_success.
async function signedIn(p) {
  await connected(p);
  p.signin();
  await p.user.signinDonePromise;
  return p.user.user_data;
}

// The close codes and pusher:error codes a client sees from now on.
function watch(p) {
  const seen = { errors: [], states: [] };
  p.connection.bind("error", (e) => seen.errors.push(e?.error?.data?.code ?? e?.data?.code ?? null));
  p.connection.bind("state_change", (s) => seen.states.push(s.current));
  return seen;
}

// A raw WebSocket that sends `frame(socket_id)` once connected: what comes back.
function raw(frame) {
  return new Promise((res) => {
    const ws = new WebSocket(`ws://${hostport}/app/${key}?protocol=7`);
    const got = [];
    ws.on("message", (m) => {
      const e = JSON.parse(m.toString());
      got.push(e);
      if (e.event === "pusher:connection_established") {
        ws.send(JSON.stringify(frame(JSON.parse(e.data).socket_id)));
      }
    });
    ws.on("close", (code) => res({ code, events: got.map((e) => e.event) }));
    ws.on("error", () => {});
  });
}

const later = (ms) => new Promise((res) => setTimeout(res, ms));

async function main() {
  switch (scenario) {
    case "string-ids": {
      // Presence members whose ids are not numbers (UUIDs, names) and a number:
      // the ids come back as the app gave them in every place Pusher shows one.
      const a = client({ member: { user_id: "user-a", user_info: { name: "a" } } });
      await connected(a);
      const ca = a.subscribe("presence-ids");
      const first = await new Promise((res) =>
        ca.bind("pusher:subscription_succeeded", (m) => res({ count: m.count, me: m.me })),
      );
      const added = [];
      const removed = [];
      ca.bind("pusher:member_added", (m) => added.push([m.id, m.info ?? null]));
      const gone = new Promise((res) =>
        ca.bind("pusher:member_removed", (m) => {
          removed.push(m.id);
          if (removed.length === 2) res();
        }),
      );
      const uuid = "0b7e6c1e-93c4-4c1f-8a55-5a6c9d1e2f30";
      const b = client({ member: { user_id: uuid, user_info: { name: "b" } } });
      const n = client({ member: { user_id: "7" } });
      await Promise.all([connected(b), connected(n)]);
      const cb = b.subscribe("presence-ids");
      const seen = await new Promise((res) =>
        cb.bind("pusher:subscription_succeeded", (m) => {
          const ids = [];
          m.each((x) => ids.push([x.id, x.info ?? null]));
          res(ids.sort());
        }),
      );
      await subscribed(n.subscribe("presence-ids"));
      const users = await (await sdk().get({ path: "/channels/presence-ids/users" })).json();
      b.disconnect();
      n.disconnect();
      await gone;
      say({ first, seen, added, users, removed: removed.sort() });
      a.disconnect();
      break;
    }
    case "signin": {
      // Two connections of user-x and one of user-y sign in; sendToUser reaches
      // both of user-x's and not user-y's. A forged sign-in is closed with 4009.
      const x = { id: "user-x", user_info: { name: "x" } };
      const x1 = client({ user: x });
      const x2 = client({ user: x });
      const y = client({ user: { id: "user-y" } });
      const data = await Promise.all([signedIn(x1), signedIn(x2), signedIn(y)]);
      say({ user_data: data });
      const got = (p) => new Promise((res) => p.user.bind("hello", res));
      const toY = [];
      y.user.bind("hello", (d) => toY.push(d));
      const both = Promise.all([got(x1), got(x2)]);
      const r = await sdk().sendToUser("user-x", "hello", { n: 1 });
      const received = await both;
      // A marker to user-y: anything for x sent to y would be there before it.
      const marker = new Promise((res) => y.user.bind("marker", res));
      await sdk().sendToUser("user-y", "marker", {});
      await marker;
      say({ status: r.status, received, toY });
      const forged = await raw((socketId) => ({
        event: "pusher:signin",
        data: { auth: `${key}:${"0".repeat(64)}`, user_data: JSON.stringify({ id: "user-x" }) },
      }));
      say({ forged });
      for (const p of [x1, x2, y]) p.disconnect();
      break;
    }
    case "terminate": {
      // terminateUserConnections closes both of user-x's connections (4009, as
      // Pusher: the client does not reconnect) and leaves user-y's.
      const x1 = client({ user: { id: "user-x" } });
      const x2 = client({ user: { id: "user-x" } });
      const y = client({ user: { id: "user-y" } });
      await Promise.all([signedIn(x1), signedIn(x2), signedIn(y)]);
      const seen = [x1, x2, y].map(watch);
      const closed = (p) =>
        new Promise((res) => p.connection.bind("state_change", (s) => s.current !== "connected" && res()));
      // Bound before the call: the closes may come before its answer.
      const both = Promise.all([closed(x1), closed(x2)]);
      const r = await sdk().terminateUserConnections("user-x");
      await both;
      // user-y still gets what is sent to them.
      const still = new Promise((res) => y.user.bind("still", res));
      await sdk().sendToUser("user-y", "still", { ok: 1 });
      say({ status: r.status, x1: seen[0], x2: seen[1], y: seen[2], still: await still });
      for (const p of [x1, x2, y]) p.disconnect();
      break;
    }
    case "apps": {
      // Two apps, each with a client on "news": each app's trigger reaches its
      // own client only. The test then publishes on myriad's /pub/news (app 1's
      // names) and /pub/<id2>:news (app 2's).
      const one = client();
      const two = client({ k: key2, s: secret2 });
      await Promise.all([connected(one), connected(two)]);
      const c1 = one.subscribe("news");
      const c2 = two.subscribe("news");
      await Promise.all([subscribed(c1), subscribed(c2)]);
      const got1 = [];
      const got2 = [];
      c1.bind_global((e, d) => !e.startsWith("pusher") && got1.push([e, d]));
      c2.bind_global((e, d) => !e.startsWith("pusher") && got2.push([e, d]));
      await sdk(appId2, key2, secret2).trigger("news", "for-two", { n: 2 });
      await sdk().trigger("news", "for-one", { n: 1 });
      const cross = await subscribed(one.subscribe(`${appId2}:news`));
      say({ ready: true, cross });
      // The test's two /pub posts, then the last of each.
      while (got1.length < 2 || got2.length < 2) await later(20);
      say({ got1, got2 });
      one.disconnect();
      two.disconnect();
      break;
    }
    case "client-webhook": {
      // A back-end's webhook receiver (the test starts myriad pointing at it and
      // sends its address here): a client event arrives as `client_event`, checked
      // by the SDK's webhook() and refused with a wrong secret.
      const posts = [];
      let done;
      const all = new Promise((res) => (done = res));
      const server = http.createServer((req, resp) => {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
          resp.writeHead(200).end("ok");
          const hook = { headers: req.headers, rawBody: body };
          const w = sdk().webhook(hook);
          posts.push({
            valid: w.isValid(),
            forged: sdk(appId, key, "wrong-secret").webhook(hook).isValid(),
            events: w.isValid() ? w.getEvents() : [],
          });
          if (posts.some((p) => p.events.some((e) => e.name === "client_event"))) done();
        });
      });
      await new Promise((res) => server.listen(0, "127.0.0.1", res));
      say({ port: server.address().port });
      [host, port] = (await nextLine()).split(":");
      step = "connect";
      const a = client();
      const b = client();
      const [socket] = await Promise.all([connected(a), connected(b)]);
      const ca = a.subscribe("private-chat");
      const cb = b.subscribe("private-chat");
      step = "subscribe";
      await Promise.all([subscribed(ca), subscribed(cb)]);
      const got = new Promise((res) => cb.bind("client-typing", res));
      ca.trigger("client-typing", { x: 1 });
      step = "client event";
      await got;
      step = `webhook (${JSON.stringify(posts)})`;
      await all;
      say({ socket, posts });
      server.close();
      a.disconnect();
      b.disconnect();
      break;
    }
    case "app-webhooks": {
      // Two apps, each with its own webhook receiver (the test starts myriad with
      // `--pusher-webhook <id>=<url>` for each and sends its address here). On each
      // app a member with a string id joins presence-room and sends a client event;
      // each receiver checks every POST with its own app's SDK webhook() (and with
      // the other app's secret, which must fail).
      const apps = [
        { id: appId, k: key, s: secret, member: "alice" },
        { id: appId2, k: key2, s: secret2, member: "bob" },
      ];
      const receivers = await Promise.all(
        apps.map(async (app, i) => {
          const other = apps[1 - i];
          const r = { posts: [] };
          r.server = http.createServer((req, resp) => {
            let body = "";
            req.on("data", (c) => (body += c));
            req.on("end", () => {
              resp.writeHead(200).end("ok");
              const hook = { headers: req.headers, rawBody: body };
              const w = sdk(app.id, app.k, app.s).webhook(hook);
              r.posts.push({
                valid: w.isValid(),
                forged: sdk(other.id, other.k, other.s).webhook(hook).isValid(),
                key: req.headers["x-pusher-key"],
                events: w.isValid() ? w.getEvents() : [],
              });
            });
          });
          await new Promise((res) => r.server.listen(0, "127.0.0.1", res));
          return r;
        }),
      );
      say({ ports: receivers.map((r) => r.server.address().port) });
      [host, port] = (await nextLine()).split(":");
      const metadata = [];
      for (const app of apps) {
        step = `app ${app.id}`;
        const member = { user_id: app.member, user_info: { app: app.id } };
        const sender = client({ k: app.k, s: app.s, member });
        const other = client({ k: app.k, s: app.s, member: { user_id: "7" } });
        await Promise.all([connected(sender), connected(other)]);
        const cs = sender.subscribe("presence-room");
        const co = other.subscribe("presence-room");
        await Promise.all([subscribed(cs), subscribed(co)]);
        const got = new Promise((res) => co.bind("client-typing", (d, m) => res([d, m])));
        cs.trigger("client-typing", { from: app.member });
        metadata.push(await got);
        // The member with a string id leaves (the test gives no grace).
        sender.disconnect();
      }
      step = "webhooks";
      const has = (r, name) => r.posts.some((p) => p.events.some((e) => e.name === name));
      const names = ["client_event", "member_added", "member_removed"];
      while (!receivers.every((r) => names.every((n) => has(r, n)))) await later(20);
      say({ metadata, posts: receivers.map((r) => r.posts) });
      receivers.forEach((r) => r.server.close());
      break;
    }
    case "channels": {
      // Occupied channels by prefix (the SDK's get of /channels), with user
      // counts for presence channels; an unsigned-for prefix is refused.
      const a = client({ member: { user_id: "1" } });
      const b = client({ member: { user_id: "user-b" } });
      const c = client();
      await Promise.all([connected(a), connected(b), connected(c)]);
      await Promise.all([
        subscribed(a.subscribe("presence-a")),
        subscribed(a.subscribe("presence-b")),
        subscribed(b.subscribe("presence-a")),
        subscribed(c.subscribe("news")),
        subscribed(c.subscribe("private-x")),
      ]);
      const get = async (params) => {
        try {
          return await (await sdk().get({ path: "/channels", params })).json();
        } catch (e) {
          return { status: e.status ?? String(e) };
        }
      };
      const presence = await get({ filter_by_prefix: "presence-", info: "user_count" });
      const all = await get({});
      const refused = await get({ info: "user_count" });
      say({ presence, all, refused });
      for (const p of [a, b, c]) p.disconnect();
      break;
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
  process.exit(0);
}

main().catch((e) => {
  say({ error: String(e?.stack ?? e) });
  process.exit(1);
});
