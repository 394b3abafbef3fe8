// Real browser clients against a running myriad: headless Chromium opens an EventSource
// on /sse/<id> and a WebSocket on /ws/<id>, reports "ready" once both are open, then
// collects what arrives.
//
// Usage: node clients.mjs BASE_URL USER COUNT
// Prints JSON lines: {"ready":true}, then {"sse":[...],"ws":[...],"lastEventId":"n"}.
import { withPage } from "./chromium.mjs";

const [base, user, countArg] = process.argv.slice(2);
const COUNT = Number(countArg || 3);

await withPage(base, async (page, problems) => {
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
});
