// One headless Chromium page for the browser tests' client scripts: launched with a
// throwaway profile, loaded at BASE_URL/healthz (the origin the clients' URLs are
// relative to), page errors collected. `withPage(base, run)` calls `run(page,
// problems)`; a failure prints {"error":...,"problems":[...]} and exits non-zero;
// the browser and its profile are removed either way. Driven by playwright-core
// (installed under crates/observe/tests/browser, shared by the browser tests).
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(process.env.PLAYWRIGHT_PACKAGE_JSON);
const { chromium } = require("playwright-core");

export async function withPage(base, run) {
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
    await run(page, problems);
  } catch (e) {
    console.log(JSON.stringify({ error: String(e), problems }));
    process.exitCode = 1;
  } finally {
    if (context) await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}
