// Headless Chromium opens N EventSources on one page over https:// (the page's origin),
// which HTTP/2 lets share one connection (HTTP/1.1 would stop at 6 per origin).
// Reports the protocol the page was loaded with, then what each EventSource received.
//
// Usage: node h2_clients.mjs BASE_URL FIRST_USER N
// Prints JSON lines: {"ready":true,"protocol":"h2"}, then {"got":[[...],...],"problems":[]}.
import { withPage } from "./chromium.mjs";

const [base, firstArg, countArg] = process.argv.slice(2);
const FIRST = Number(firstArg);
const N = Number(countArg || 50);

await withPage(base, async (page, problems) => {
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
});
