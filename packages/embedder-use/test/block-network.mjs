// Preloaded into the child of use-embedder.test.ts: every way Node reaches the network
// throws, so a model that tried to download would fail the child.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

const refuse = (what) => () => {
  throw new Error(`network blocked: ${what}`);
};
globalThis.fetch = refuse('fetch');
net.Socket.prototype.connect = refuse('net.Socket.connect');
for (const mod of [http, https]) {
  mod.request = refuse(`${mod === http ? 'http' : 'https'}.request`);
  mod.get = refuse(`${mod === http ? 'http' : 'https'}.get`);
}
dns.lookup = refuse('dns.lookup');
dns.promises.lookup = refuse('dns.promises.lookup');
