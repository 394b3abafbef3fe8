// Headless Chromium opens N EventSources on one page over https:// (the page's origin),
// which HTTP/2 lets share one connection (HTTP/1.1 would stop at 6 per origin).
// Reports the protocol the page was loaded with, then what each EventSource received.
//
// Usage: node h2_clients.mjs BASE_URL FIRST_USER N
// Prints JSON lines: {"ready":true,"protocol":"h2"}, then {"got":[[...],...],"problems":[]}.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base, firstArg, countArg] = process.argv.slice(2);
const FIRST = Number(firstArg);
const N = Number(countArg || 50);
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
  const protocol = await page.evaluate(() => performance.getEntriesByType("navigation")[0].nextHopProtocol);
  await page.evaluate(([first, n]) => {
    window.got = [];
    let open = 0;
    for (let i = 0; i < n; i++) {
      window.got.push([]);
      const es = new EventSource("/sse/" + (first + i));
      es.onopen = () => { if (++open === n) window.ready = true; };
      es.onmessage = e => window.got[i].push(e.data);
    }
  }, [FIRST, N]);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 20000 });
  console.log(JSON.stringify({ ready: true, protocol }));
  await page.waitForFunction(() => window.got.every(g => g.length >= 1), null, { timeout: 20000, polling: 100 });
  const got = await page.evaluate(() => window.got);
  console.log(JSON.stringify({ got, problems }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e), problems }));
  process.exitCode = 1;
} finally {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
