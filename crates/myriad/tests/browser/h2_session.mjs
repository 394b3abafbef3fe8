// Headless Chromium over HTTP/2: an EventSource names itself with session=, then the
// page's fetch POSTs /subscribe for it (the two share the page's HTTP/2 connection).
// Prints the POST's answer, then what arrived as the new channel's events.
//
// Usage: node h2_session.mjs BASE_URL CHANNEL_IN_URL CHANNEL_LATER
// Prints JSON lines: {"status":200,"answer":{...}}, then {"got":[...],"problems":[]}.
import { withPage } from "./chromium.mjs";

const [base, first, later] = process.argv.slice(2);

await withPage(base, async (page, problems) => {
  const answer = await page.evaluate(async ([first, later]) => {
    const session = crypto.randomUUID();
    window.got = [];
    const es = new EventSource(`/sse?session=${session}&channel=${first}`);
    es.addEventListener(later, (e) => window.got.push(e.data));
    await new Promise((resolve) => { es.onopen = resolve; });
    const r = await fetch(`/subscribe?session=${session}&channel=${later}`, { method: "POST" });
    return { status: r.status, answer: await r.json() };
  }, [first, later]);
  console.log(JSON.stringify(answer));
  await page.waitForFunction(() => window.got.length >= 1, null, { timeout: 20000, polling: 100 });
  const got = await page.evaluate(() => window.got);
  console.log(JSON.stringify({ got, problems }));
});
