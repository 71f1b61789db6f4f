// `node loaded-modules.mjs <entry>`: imports <entry> and prints, as JSON, every module that import
// loaded: ES modules through a loader hook, CommonJS ones from the require cache (packages such as
// pg are CommonJS behind an ESM wrapper). Paths are printed as they are; the caller shortens them.
import { createRequire, register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';

const seen = [];
const { port1, port2 } = new MessageChannel();
port1.on('message', (url) => seen.push(url));
port1.unref();
register(
  `data:text/javascript,${encodeURIComponent(`
  let port;
  export function initialize(data) { port = data.port; }
  export async function load(url, context, next) { port.postMessage(url); return next(url, context); }`)}`,
  { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] },
);
await import(process.argv[2]);
await new Promise((resolve) => setTimeout(resolve, 100));
const cached = Object.keys(createRequire(import.meta.url).cache).map((file) => `file://${file}`);
console.log(JSON.stringify([...new Set([...seen, ...cached])]));
