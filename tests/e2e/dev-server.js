#!/usr/bin/env node
// For working on the page without a rebuild: serves web/ from this checkout and forwards
// everything else (the API, /attnlab.wasm) to a running `attnlab serve`. Not part of
// attnlab and not used by the tests, which run against `attnlab serve` itself.
//
//   build/attnlab serve --port 8080 &
//   node tests/e2e/dev-server.js --api http://127.0.0.1:8080 [--port 8081] [--host 127.0.0.1]
//
// The first line printed is the URL, as `attnlab serve` prints it; point a browser or
// ATTNLAB_URL (the browser tests) at it to try the page as it is on disk.
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');

const WEB = path.resolve(__dirname, '..', '..', 'web');
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'application/javascript; charset=utf-8',   // the page's ES modules need a JavaScript type
  '.json': 'application/json; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

// A file of web/, or null for anything else (which goes to the server).
function webFile(urlPath) {
  const rel = urlPath === '/' ? 'index.html' : decodeURIComponent(urlPath).replace(/^\/+/, '');
  const file = path.normalize(path.join(WEB, rel));
  return file.startsWith(WEB + path.sep) && fs.existsSync(file) && fs.statSync(file).isFile() ? file : null;
}

async function forward(req, res, api) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const init = { method: req.method, headers: { 'Content-Type': req.headers['content-type'] || 'application/json' } };
  if (req.method === 'POST') init.body = Buffer.concat(chunks);
  const upstream = await fetch(api + req.url, init);
  res.writeHead(upstream.status, { 'Content-Type': upstream.headers.get('content-type') || 'application/octet-stream', 'Cache-Control': 'no-store' });
  res.end(Buffer.from(await upstream.arrayBuffer()));
}

function start({ host, port, api }) {
  const server = http.createServer((req, res) => {
    const file = webFile(new URL(req.url, 'http://localhost').pathname);
    if (file) {
      res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-store' });
      res.end(fs.readFileSync(file));
      return;
    }
    forward(req, res, api).catch((e) => {
      res.writeHead(502, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: `could not reach attnlab serve at ${api}: ${e.message}` }));
    });
  });
  server.listen(port, host, () => {
    console.log(`http://${host}:${server.address().port}/`);
    console.log(`(web/ from this checkout; everything else from ${api})`);
  });
}

const args = process.argv.slice(2);
const get = (name, fallback) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : fallback; };
const api = get('--api', null);
if (!api) {
  console.error('dev-server: --api URL is required: the URL of a running `attnlab serve` (e.g. http://127.0.0.1:8080)');
  process.exit(2);
}
start({ host: get('--host', '127.0.0.1'), port: Number(get('--port', '8081')), api: api.replace(/\/+$/, '') });
