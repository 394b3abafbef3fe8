// The peer server of `myriad bench rooms --peer socketio`: Socket.IO with rooms, a
// cluster of WORKERS processes joined by the cluster adapter (an emit reaches the
// room's members on every worker). A client connects over the WebSocket transport with
// `?rooms=r1,r7,...` and joins those rooms; POST /pub/ROOM emits the body as event `m`
// to ROOM. GET /stats answers the receiving worker's counters only. The packages
// (socket.io, @socket.io/cluster-adapter) are installed next to this file by the bench.
const cluster = require('node:cluster');
const http = require('node:http');
const { Server } = require('socket.io');
const { createAdapter, setupPrimary } = require('@socket.io/cluster-adapter');
const port = Number(process.env.PORT);
const workers = Number(process.env.WORKERS || 2);

if (cluster.isPrimary) {
  setupPrimary();
  const pids = [];
  let ready = 0;
  for (let i = 0; i < workers; i++) {
    const w = cluster.fork();
    pids.push(w.process.pid);
    w.on('message', (m) => {
      if (m === 'ready' && ++ready === workers) {
        console.error(`socket.io peer serving listen=127.0.0.1:${port} workers=${pids.join(',')}`);
      }
    });
  }
} else {
  let connects = 0, closes = 0, published = 0;
  const server = http.createServer((req, res) => {
    const [, kind, room] = req.url.split('/');
    if (req.method === 'POST' && kind === 'pub' && room) {
      const parts = [];
      req.on('data', (c) => parts.push(c));
      req.on('end', () => {
        io.to(room).emit('m', Buffer.concat(parts).toString());
        published++;
        res.end('{}');
      });
    } else if (kind === 'stats') {
      res.end(JSON.stringify({ connections: io.engine.clientsCount + 1, connects, closes, published }));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  const io = new Server(server, { transports: ['websocket'], serveClient: false, adapter: createAdapter() });
  io.on('connection', (socket) => {
    connects++;
    socket.join(String(socket.handshake.query.rooms || '').split(',').filter(Boolean));
    socket.on('disconnect', () => closes++);
  });
  process.on('disconnect', () => process.exit(0));
  server.listen(port, '127.0.0.1', () => process.send('ready'));
}
