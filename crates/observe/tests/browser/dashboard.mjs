// Loads the myriad dashboard in Debian's headless Chromium (driven by playwright-core)
// and checks that it works as a person would see it: the page loads, every chart
// receives samples and draws them, and the console stays free of errors.
//
// Usage: node dashboard.mjs URL SCREENSHOT.png [MIN_SAMPLES] [EXTRA_REGEXP]
// EXTRA_REGEXP must match the server figures line (default: "subscriptions").
// Exit 0 and a JSON summary on success; exit 1 with the reason otherwise.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, screenshot, minArg, extraArg] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error("usage: node dashboard.mjs URL SCREENSHOT.png [MIN_SAMPLES]");
  process.exit(2);
}
const MIN_SAMPLES = Number(minArg || 3);
const EXTRA = new RegExp(extraArg || "subscriptions");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
// Each chart and the colour of a series that must appear inside its plot area.
// Each chart and the colours of its series; one of them must be drawn inside the plot area
// (a series at zero can hide under the next one, so any of them counts).
const CHARTS = {
  "c-conn": ["#4dabf7"],
  "c-mem": ["#f59f00", "#e8590c", "#37b24d"],
  "c-cpu": ["#d8dee6", "#4dabf7", "#f06595", "#8a97a5"],
  "c-lag": ["#37b24d", "#f59f00", "#ff6b6b"],
  "c-out": ["#845ef7", "#20c997"],
  "c-latency": ["#37b24d", "#f59f00", "#ff6b6b"],
};

const problems = [];
const userDataDir = mkdtempSync(join(tmpdir(), "observe-chromium-"));
let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", m => { if (m.type() === "error") problems.push("console error: " + m.text()); });
  page.on("pageerror", e => problems.push("page error: " + e.message));
  page.on("requestfailed", r => problems.push("request failed: " + r.url() + " " + (r.failure()?.errorText || "")));
  page.on("response", r => { if (r.status() >= 400) problems.push("HTTP " + r.status() + " for " + r.url()); });

  const res = await page.goto(url, { waitUntil: "load", timeout: 30000 });
  if (!res || res.status() !== 200) throw new Error("dashboard answered " + (res && res.status()));
  await page.waitForFunction(
    n => Number(document.getElementById("samples")?.textContent) >= n,
    MIN_SAMPLES,
    { timeout: 30000, polling: 200 },
  );
  const result = await page.evaluate(charts => {
    const hex = h => [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16));
    const out = {};
    for (const [id, colours] of Object.entries(charts)) {
      const c = document.getElementById(id);
      const dpr = window.devicePixelRatio || 1;
      // The plot area starts below the legend (22 px) and right of the y labels (64 px).
      const x0 = Math.ceil(66 * dpr), y0 = Math.ceil(24 * dpr);
      const img = c.getContext("2d").getImageData(x0, y0, c.width - x0, c.height - y0).data;
      const rgb = colours.map(hex);
      let hits = 0;
      for (let i = 0; i < img.length; i += 4) {
        if (img[i + 3] > 200 && rgb.some(([r, g, b]) =>
          Math.abs(img[i] - r) < 8 && Math.abs(img[i + 1] - g) < 8 && Math.abs(img[i + 2] - b) < 8)) hits++;
      }
      out[id] = { points: Number(c.dataset.points || 0), pixels: hits, top: Number(c.dataset.top || 0) };
    }
    return {
      charts: out,
      samples: Number(document.getElementById("samples").textContent),
      connections: document.getElementById("f-conn").textContent,
      state: document.getElementById("state").textContent,
      extra: document.getElementById("extra").textContent,
      extraParts: Array.from(document.querySelectorAll("#extra b"), b => b.textContent),
    };
  }, CHARTS);
  for (const [id, r] of Object.entries(result.charts)) {
    if (r.points < MIN_SAMPLES) problems.push(`${id}: ${r.points} points, want >= ${MIN_SAMPLES}`);
    if (r.pixels < 20) problems.push(`${id}: none of the series colours ${CHARTS[id]} drawn in the plot area (${r.pixels} px)`);
  }
  if (!EXTRA.test(result.extra)) problems.push(`server figures (extra) do not match ${EXTRA}: ` + result.extra);
  // Counters are whole numbers: no "loops 2.0", no "pid 18k".
  const fractional = result.extraParts.filter(t => /^(pid|loops) /.test(t) && !/^(pid|loops) [0-9]+$/.test(t));
  if (fractional.length) problems.push("counters not shown as integers: " + fractional.join(", "));
  if (!/^live/.test(result.state)) problems.push("status is not live: " + result.state);
  if (!/[0-9]/.test(result.connections)) problems.push("connections figure not shown: " + result.connections);
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify(result));
} catch (e) {
  problems.push(String(e && e.stack || e));
} finally {
  if (context) await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
if (problems.length) {
  console.error("dashboard test failed:\n  " + problems.join("\n  "));
  process.exit(1);
}
