// Chromium's own EventSource on two channels of one connection, through a cut: it
// listens to each channel's events by name, reports "ready" once open, keeps the
// ids, reconnects by itself after the cut (sending the last composite id back as
// Last-Event-ID) and finishes once it holds COUNT messages of each channel.
//
// Usage: node channels.mjs BASE_URL CHANNEL_A CHANNEL_B COUNT
// Prints JSON lines: {"ready":true}, then {"got":{A:[...],B:[...]},"opens":n,"ids":[...]}.
import { withPage } from "./chromium.mjs";

const [base, a, b, countArg] = process.argv.slice(2);
const COUNT = Number(countArg || 4);

await withPage(base, async (page, problems) => {
  await page.evaluate(([a, b, count]) => {
    window.got = { [a]: [], [b]: [] };
    window.opens = 0;
    window.ids = [];
    const es = new EventSource(`/sse?channel=${a}&channel=${b}`);
    es.onopen = () => { window.opens += 1; };
    for (const name of [a, b]) {
      es.addEventListener(name, e => {
        window.got[name].push(e.data);
        window.ids.push(e.lastEventId);
      });
    }
    window.done = () => window.got[a].length >= count && window.got[b].length >= count;
  }, [a, b, COUNT]);
  await page.waitForFunction(() => window.opens >= 1, null, { timeout: 15000 });
  console.log(JSON.stringify({ ready: true }));
  await page.waitForFunction(() => window.done(), null, { timeout: 30000, polling: 100 });
  const result = await page.evaluate(() => ({ got: window.got, opens: window.opens, ids: window.ids }));
  console.log(JSON.stringify({ ...result, problems }));
});
