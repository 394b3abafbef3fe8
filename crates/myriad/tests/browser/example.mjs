// The channels example page of the admin listener in Chromium: it loads the
// JavaScript client from the admin listener, subscribes to its channels on the
// server, and shows what is published to them.
//
// Usage: node example.mjs SERVER_URL PAGE_URL TEXT
// Prints JSON lines: {"ready":true} once both channels are subscribed, then
// {"shown":[...lines...],"transport":"…"} once TEXT is on the page.
import { withPage } from "./chromium.mjs";

const [server, pageUrl, text] = process.argv.slice(2);

await withPage(server, async (page, problems) => {
  await page.goto(pageUrl);
  await page.waitForFunction(
    () => document.getElementById("log").textContent.split("subscribed to").length === 3,
    null,
    { timeout: 15000 },
  );
  console.log(JSON.stringify({ ready: true }));
  await page.waitForFunction(
    (t) => document.getElementById("log").textContent.includes(t),
    text,
    { timeout: 15000, polling: 100 },
  );
  const shown = await page.evaluate(() =>
    [...document.querySelectorAll("#log div")].map((d) => d.textContent));
  const transport = await page.evaluate(() => document.getElementById("transport").textContent);
  console.log(JSON.stringify({ shown, transport, problems }));
});
