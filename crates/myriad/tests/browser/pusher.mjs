// Pusher's own browser clients in headless Chromium against a running myriad with
// `--pusher-app`: the page loads pusher-js's web build and Laravel Echo's browser
// build (from tests/pusher/node_modules, served under /__pusher/ by a route, so
// nothing but myriad is on the origin) as an app's page does. One Echo subscribes to
// a public, a private and a presence channel; a second, plain pusher-js client on the
// private channel whispers (a client event) to it. The app's auth endpoint is a
// route here signing with the app's secret, as a Laravel back-end would.
//
// Usage: node pusher.mjs BASE_URL NODE_MODULES KEY SECRET COUNT
// Prints JSON lines: {"ready":true,"socket_id":…,"here":[…]}, then
// {"news":[…],"room":[…],"whispers":[…],"problems":[…]} once COUNT messages came on each.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { join, normalize } from "node:path";
import { withPage } from "./chromium.mjs";

const [base, modules, key, secret, countArg] = process.argv.slice(2);
const COUNT = Number(countArg || 3);
const PREFIX = "/__pusher/";

await withPage(base, async (page, problems) => {
  await page.route(`${base}${PREFIX}**`, (route) => {
    const file = normalize(new URL(route.request().url()).pathname.slice(PREFIX.length));
    if (file.startsWith("..")) return route.fulfill({ status: 404 });
    route.fulfill({ body: readFileSync(join(modules, file)), contentType: "text/javascript" });
  });
  // The app's auth endpoint: `key:hmac(secret, socket_id:channel[:channel_data])`.
  await page.route(`${base}/__auth`, (route) => {
    const form = new URLSearchParams(route.request().postData() || "");
    const socket = form.get("socket_id");
    const channel = form.get("channel_name");
    const answer = {};
    let signed = `${socket}:${channel}`;
    if (channel.startsWith("presence-")) {
      answer.channel_data = JSON.stringify({ user_id: "7", user_info: { name: "Ada" } });
      signed += `:${answer.channel_data}`;
    }
    answer.auth = `${key}:${createHmac("sha256", secret).update(signed).digest("hex")}`;
    route.fulfill({ body: JSON.stringify(answer), contentType: "application/json" });
  });
  await page.addScriptTag({ url: `${base}${PREFIX}pusher-js/dist/web/pusher.min.js` });
  await page.addScriptTag({ url: `${base}${PREFIX}laravel-echo/dist/echo.iife.js` });
  const ready = await page.evaluate(async (key) => {
    const options = {
      key,
      wsHost: location.hostname,
      wsPort: Number(location.port),
      forceTLS: false,
      enabledTransports: ["ws"],
      disableStats: true,
      cluster: "mt1",
      authEndpoint: "/__auth",
    };
    window.got = { news: [], room: [], whispers: [] };
    const echo = new Echo.default({ broadcaster: "pusher", ...options });
    const subscribed = (channel) =>
      new Promise((res, rej) => {
        channel.subscribed(res);
        channel.error((e) => rej(new Error(JSON.stringify(e))));
      });
    const news = echo.channel("news").listen(".message", (e) => window.got.news.push(e));
    const room = echo
      .private("room")
      .listen(".message", (e) => window.got.room.push(e))
      .listenForWhisper("typing", (e) => window.got.whispers.push(e));
    let here = null;
    const lobby = echo.join("lobby").here((users) => (here = users));
    await Promise.all([subscribed(news), subscribed(room), subscribed(lobby)]);
    // A second client of the app, plain pusher-js, on the private channel.
    const other = new Pusher(key, {
      ...options,
      channelAuthorization: { endpoint: "/__auth", transport: "ajax" },
    });
    const otherRoom = other.subscribe("private-room");
    await new Promise((res, rej) => {
      otherRoom.bind("pusher:subscription_succeeded", res);
      otherRoom.bind("pusher:subscription_error", (e) => rej(new Error(JSON.stringify(e))));
    });
    window.whisper = (i) => otherRoom.trigger("client-typing", { i });
    return { socket_id: echo.socketId(), here };
  }, key);
  console.log(JSON.stringify({ ready: true, ...ready }));
  for (let i = 1; i <= COUNT; i++) await page.evaluate((i) => window.whisper(i), i);
  await page.waitForFunction(
    (count) => ["news", "room", "whispers"].every((k) => window.got[k].length >= count),
    COUNT,
    { timeout: 20000, polling: 100 },
  );
  const got = await page.evaluate(() => window.got);
  console.log(JSON.stringify({ ...got, problems }));
});
