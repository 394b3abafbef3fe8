// The JavaScript client (clients/js) in headless Chromium against a running myriad:
// the page imports the library as a module (served from disk under /__client/ by a
// route, so nothing but the server is on the origin), opens one client per transport
// — WebSocket, the browser's EventSource, fetch long-poll — each subscribed to two
// channels, reports "ready" once all are subscribed, then collects what arrives.
//
// Usage: node js_client.mjs BASE_URL CLIENT_DIR COUNT
// Prints JSON lines: {"ready":true,"transports":[...]}, then
// {"websocket":{"room:1":[...],"news":[...]},"sse":{...},"longpoll":{...},"errors":[...],"problems":[...]}.
import { readFileSync } from "node:fs";
import { join, normalize } from "node:path";
import { withPage } from "./chromium.mjs";

const [base, clientDir, countArg] = process.argv.slice(2);
const COUNT = Number(countArg || 3);
const PREFIX = "/__client/";

await withPage(base, async (page, problems) => {
  await page.route(`${base}${PREFIX}**`, (route) => {
    const file = normalize(new URL(route.request().url()).pathname.slice(PREFIX.length));
    if (file.startsWith("..")) return route.fulfill({ status: 404 });
    route.fulfill({ body: readFileSync(join(clientDir, file)), contentType: "text/javascript" });
  });
  const transports = await page.evaluate(async ([prefix, count]) => {
    const { MyriadClient } = await import(prefix + "index.js");
    window.got = { errors: [] };
    const clients = ["websocket", "sse", "longpoll"].map((kind) => {
      // The page's origin is the default server URL.
      const c = new MyriadClient(undefined, { transports: [kind] });
      const got = (window.got[kind] = {});
      c.on("message", (m) => (got[m.channel] ??= []).push(m.data));
      c.on("error", (e) => window.got.errors.push(`${kind}: ${e.kind} ${e.message}`));
      c.connect();
      return c;
    });
    await Promise.all(clients.flatMap((c) => [c.subscribe("room:1"), c.subscribe("news")]));
    window.done = () =>
      ["websocket", "sse", "longpoll"].every((k) =>
        ["room:1", "news"].every((ch) => (window.got[k][ch]?.length ?? 0) >= count),
      );
    return clients.map((c) => c.transport);
  }, [PREFIX, COUNT]);
  console.log(JSON.stringify({ ready: true, transports }));
  await page.waitForFunction(() => window.done(), null, { timeout: 20000, polling: 100 });
  const got = await page.evaluate(() => window.got);
  console.log(JSON.stringify({ ...got, problems }));
});
