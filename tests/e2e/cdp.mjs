// Drives a headless Chromium over the DevTools protocol for the console's action tests: opens
// URL, then clicks the first element matching SELECTOR (or, given `--follow`, waits for the page
// to navigate by itself: a form its script submits), and prints the HTML of the page that
// loads next. Node's WebSocket (node --experimental-websocket on Node 20); no package.
//
//   node --experimental-websocket cdp.mjs BROWSER URL SELECTOR|--follow
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [browser, url, action] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), 'cdp-'));
const chrome = spawn(browser, [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
  '--remote-debugging-port=0', `--user-data-dir=${profile}`, 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe'] });
const quit = (code, message) => {
  if (message) process.stderr.write(message + '\n');
  chrome.kill('SIGKILL');
  rmSync(profile, { recursive: true, force: true });
  process.exit(code);
};
setTimeout(() => quit(3, 'timed out after 60 s'), 60000);

const endpoint = await new Promise((resolve) => {
  let seen = '';
  chrome.stderr.on('data', (chunk) => {
    seen += chunk;
    const found = seen.match(/DevTools listening on (ws:\/\/\S+)/);
    if (found) resolve(found[1]);
  });
});
const socket = new WebSocket(endpoint);
await new Promise((resolve, reject) => {
  socket.onopen = resolve;
  socket.onerror = reject;
});
let nextId = 0;
const pending = new Map();
const waiting = [];
socket.onmessage = ({ data }) => {
  const message = JSON.parse(data);
  if (message.id !== undefined && pending.has(message.id)) {
    const { resolve, reject } = pending.get(message.id);
    pending.delete(message.id);
    if (message.error) reject(new Error(JSON.stringify(message.error)));
    else resolve(message.result);
    return;
  }
  for (const [i, w] of waiting.entries()) {
    if (w.method === message.method && w.sessionId === message.sessionId) {
      waiting.splice(i, 1);
      w.resolve(message.params);
      return;
    }
  }
};
const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
  const id = ++nextId;
  pending.set(id, { resolve, reject });
  socket.send(JSON.stringify({ id, method, params, sessionId }));
});
const event = (method, sessionId) => new Promise((resolve) => waiting.push({ method, sessionId, resolve }));
const evaluate = async (expression, sessionId) =>
  (await send('Runtime.evaluate', { expression, returnByValue: true }, sessionId)).result.value;

const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
await send('Page.enable', {}, sessionId);
let loaded = event('Page.loadEventFired', sessionId);
await send('Page.navigate', { url }, sessionId);
if (action === '--follow') {
  // The page may have navigated before its own load event: wait for another URL, loaded.
  const start = new URL(url).href;
  for (;;) {
    // Evaluating fails while a navigation replaces the page: try again.
    const seen = await evaluate('location.href + "\\n" + document.readyState', sessionId).catch(() => '');
    const [href, state] = String(seen).split('\n');
    if (href && href !== start && href !== 'about:blank' && state === 'complete') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
} else {
  await loaded;
  loaded = event('Page.loadEventFired', sessionId);
  const clicked = await evaluate(
    `(() => { const e = document.querySelector(${JSON.stringify(action)}); if (!e) return false; e.click(); return true; })()`,
    sessionId,
  );
  if (!clicked) {
    quit(2, `nothing matches ${action} on:\n` + await evaluate('document.documentElement.outerHTML', sessionId));
  }
  await loaded;
}
process.stdout.write(await evaluate('document.documentElement.outerHTML', sessionId));
quit(0);
