// The peer server of `myriad bench broadcast --peer node`: the small Node.js cluster the
// broadcast figures are compared with. GET /sub/ID holds a chunked stream for user ID;
// POST /pub/ID writes the body plus "\n" to each of ID's streams with one res.write per
// subscriber, on every worker (the receiving worker forwards through the primary).
// GET /stats answers the receiving worker's counters only.
const cluster = require('node:cluster');
const http = require('node:http');
const port = Number(process.env.PORT);
const workers = Number(process.env.WORKERS || 2);

if (cluster.isPrimary) {
  const pids = [];
  let ready = 0;
  for (let i = 0; i < workers; i++) {
    const w = cluster.fork();
    pids.push(w.process.pid);
    w.on('message', (m) => {
      if (m === 'ready') {
        if (++ready === workers) console.error(`node peer serving listen=127.0.0.1:${port} workers=${pids.join(',')}`);
        return;
      }
      for (const other of Object.values(cluster.workers)) if (other !== w) other.send(m);
    });
  }
} else {
  const subs = new Map();
  let connections = 0, out = 0, connects = 0, closes = 0;
  const deliver = (user, data) => {
    const s = subs.get(user);
    if (!s) return 0;
    for (const res of s) res.write(data);
    out += s.size;
    return s.size;
  };
  process.on('message', (m) => deliver(m.user, m.data));
  process.on('disconnect', () => process.exit(0));
  http.createServer((req, res) => {
    const [, kind, id] = req.url.split('/');
    if (req.method === 'GET' && kind === 'sub') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.flushHeaders();
      if (!subs.has(id)) subs.set(id, new Set());
      const s = subs.get(id);
      s.add(res);
      connections++; connects++;
      req.on('close', () => { s.delete(res); connections--; closes++; });
    } else if (req.method === 'POST' && kind === 'pub') {
      const parts = [];
      req.on('data', (c) => parts.push(c));
      req.on('end', () => {
        const data = Buffer.concat(parts).toString() + '\n';
        process.send({ user: id, data });
        const n = deliver(id, data);
        res.end(JSON.stringify({ connections: n, users: 1 }));
      });
    } else if (kind === 'stats') {
      res.end(JSON.stringify({ connections: connections + 1, messages_out: out, connects, closes }));
    } else {
      res.statusCode = 404;
      res.end();
    }
  }).listen(port, '127.0.0.1', () => process.send('ready'));
}
