// Real browser clients against a running myriad: headless Chromium opens an EventSource
// on /sse/<id> and a WebSocket on /ws/<id>, reports "ready" once both are open, then
// collects what arrives. Driven by playwright-core (installed under
// crates/observe/tests/browser, shared by the browser tests).
//
// Usage: node clients.mjs BASE_URL USER COUNT
// Prints JSON lines: {"ready":true}, then {"sse":[...],"ws":[...],"lastEventId":"n"}.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base, user, countArg] = process.argv.slice(2);
const COUNT = Number(countArg || 3);
const require = createRequire(process.env.PLAYWRIGHT_PACKAGE_JSON);
const { chromium } = require("playwright-core");

const userDataDir = mkdtempSync(join(tmpdir(), "myriad-chromium-"));
const problems = [];
let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const page = context.pages()[0] || (await context.newPage());
  page.on("pageerror", e => problems.push("page error: " + e.message));
  await page.goto(base + "/healthz");
  await page.evaluate(([user, count]) => {
    window.got = { sse: [], ws: [], lastEventId: null, errors: [] };
    let open = 0;
    const opened = () => { if (++open === 2) window.ready = true; };
    const es = new EventSource("/sse/" + user);
    es.onopen = opened;
    es.onmessage = e => { window.got.sse.push(e.data); window.got.lastEventId = e.lastEventId; };
    const ws = new WebSocket(location.origin.replace("http", "ws") + "/ws/" + user);
    ws.onopen = opened;
    ws.onmessage = e => window.got.ws.push(e.data);
    ws.onerror = () => window.got.errors.push("websocket error");
    window.done = () => window.got.sse.length >= count && window.got.ws.length >= count;
  }, [user, COUNT]);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 15000 });
  console.log(JSON.stringify({ ready: true }));
  await page.waitForFunction(() => window.done(), null, { timeout: 20000, polling: 100 });
  const got = await page.evaluate(() => window.got);
  console.log(JSON.stringify({ ...got, problems }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e), problems }));
  process.exitCode = 1;
} finally {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
