import { CSRF_HEADER } from './security.js';

/**
 * The dashboard's one HTML page. The script picks the view from the path (`/`, `/dead`,
 * `/jobs/<id>`), reads the JSON endpoints and renders with `textContent` only, so no value from
 * the database is ever parsed as HTML. The CSRF token is embedded for the page's own POSTs.
 */
export function dashboardPage(options: { csrfToken: string; nonce: string }): string {
  // The token is base64url and the nonce too: neither can break out of the attribute or string.
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Leasehold</title>
<style>${STYLE}</style>
</head>
<body data-csrf="${options.csrfToken}">
<header><strong>Leasehold</strong> <nav><a href="/">Queues</a> <a href="/dead">Dead jobs</a></nav>
<span id="status" aria-live="polite"></span></header>
<main id="main"></main>
<script nonce="${options.nonce}">
const CSRF_HEADER = ${JSON.stringify(CSRF_HEADER)};
${SCRIPT}
</script>
</body>
</html>`;
}

const STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1rem; background: #1d232a; color: #fff; }
header a { color: #9fd3ff; margin-right: .8rem; }
#status { margin-left: auto; font-size: 12px; opacity: .8; }
main { padding: 1rem; }
table { border-collapse: collapse; background: #fff; min-width: 60%; }
th, td { padding: .35rem .7rem; border-bottom: 1px solid #e3e6ea; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.paused td { color: #8a5a00; }
.bad { color: #b00020; font-weight: 600; }
pre { background: #fff; padding: .7rem; border: 1px solid #e3e6ea; max-width: 100%; overflow: auto; white-space: pre-wrap; word-break: break-all; }
button { margin-right: .4rem; }
form.filters { margin-bottom: .8rem; display: flex; gap: .5rem; }
svg { background: #fff; border: 1px solid #e3e6ea; }
.note { color: #5b6570; font-size: 12px; }
`;

// Plain browser JavaScript, kept framework-free; every value is set with textContent.
const SCRIPT = `
const main = document.getElementById('main');
const statusLine = document.getElementById('status');
const csrf = document.body.dataset.csrf;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === 'onclick') node.addEventListener('click', value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function age(ms) {
  if (ms === null || ms === undefined) return '-';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
}

async function getJson(path) {
  const res = await fetch(path, { credentials: 'same-origin' });
  if (!res.ok) throw new Error((await res.json()).error || res.statusText);
  return res.json();
}

// One format for every time on every page: ISO 8601 in UTC, as the CLI prints them.
function time(value) {
  return value === null || value === undefined ? '-' : new Date(value).toISOString();
}

// Attempts with the budget that applied, as the CLI shows them (see formatAttempts in the CLI).
function attempts(count, max, budget) {
  if (budget === null || budget === undefined) return count + '/' + max;
  if (count < budget) return count + '/' + budget + ' (permanent error)';
  if (budget >= max) return count + '/' + max;
  return count + '/' + budget + ' (budget for this error; max ' + max + ')';
}
const BUDGET_NOTE = 'A budget below max: unclassified errors (neither RetryableError nor PermanentError) get the ' +
  "queue's unknownErrorAttempts (default 3), and a queue's maxAttempts caps every job's.";

function deathBudget(history) {
  const death = history.filter((e) => e.kind === 'dead').pop();
  const budget = death && death.detail ? death.detail.attemptBudget : null;
  return typeof budget === 'number' ? budget : null;
}

// What the history's detail column says of an event. A replay carries the error the job died
// with: it is shown as that, not as an error of the replay.
function eventDetail(e) {
  const parts = [];
  if (e.kind === 'replayed') {
    if (e.errorCode) parts.push('had died with ' + e.errorCode);
  } else {
    if (e.errorCode) parts.push(e.errorClass ? e.errorCode + ' (' + e.errorClass + ')' : e.errorCode);
    if (e.message && e.kind !== 'cancelled') parts.push(e.message);
  }
  if (e.delayMs !== null && e.delayMs !== undefined) parts.push('again in ' + age(e.delayMs));
  if (e.leaseExtensions) parts.push(e.leaseExtensions + ' lease extension(s)');
  if (e.operation) parts.push(e.operation + ' refused');
  if (e.kind === 'dead' && e.detail && typeof e.detail.attemptBudget === 'number')
    parts.push('attempt budget ' + e.detail.attemptBudget);
  if (e.reason) parts.push('reason: ' + e.reason);
  return parts.join('; ');
}

// The reason an operator typed for replays and cancels on this page (recorded in the history).
function reasonField() {
  return el('input', { id: 'reason', size: '40', maxlength: '1000',
    placeholder: 'reason for replay or cancel (recorded in the history)', value: typedReason });
}
let typedReason = '';
document.addEventListener('input', (event) => {
  if (event.target && event.target.id === 'reason') typedReason = event.target.value;
});

async function act(id, action) {
  const fallback = action === 'cancel' ? 'cancelled from the dashboard' : 'replayed from the dashboard';
  const reason = typedReason.trim() || fallback;
  const res = await fetch('/api/jobs/' + id + '/' + action, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', [CSRF_HEADER]: csrf },
    body: JSON.stringify({ reason }),
  });
  const body = await res.json();
  statusLine.textContent = res.ok ? action + ' job ' + id + ': done' : action + ' failed: ' + body.error;
  return res.ok;
}

function chart(samples, queues) {
  const width = 240, height = 40;
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('width', width); svg.setAttribute('height', height);
  svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
  if (samples.length < 2) return svg;
  const t0 = samples[0].at, t1 = samples[samples.length - 1].at;
  const max = Math.max(1, ...samples.map((s) => queues.reduce((sum, q) => sum + (s.perQueue[q] || 0), 0)));
  const points = samples.map((s) => {
    const total = queues.reduce((sum, q) => sum + (s.perQueue[q] || 0), 0);
    const x = ((s.at - t0) / Math.max(1, t1 - t0)) * (width - 4) + 2;
    const y = height - 2 - (total / max) * (height - 4);
    return x.toFixed(1) + ',' + y.toFixed(1);
  });
  const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
  line.setAttribute('points', points.join(' '));
  line.setAttribute('fill', 'none'); line.setAttribute('stroke', '#2a7de1'); line.setAttribute('stroke-width', '2');
  svg.append(line);
  return svg;
}

async function overview() {
  const data = await getJson('/api/overview');
  const rows = data.queues.map((q) =>
    el('tr', { 'data-queue': q.queue, class: q.paused ? 'paused' : q.unattended ? 'unattended' : '' },
      el('td', {}, q.queue),
      el('td', { class: 'num', 'data-field': 'pending' }, q.pending + (q.capped ? '+' : '')),
      el('td', { class: 'num', 'data-field': 'running' }, q.running),
      el('td', { class: 'num' + (q.dead > 0 ? ' bad' : ''), 'data-field': 'dead' }, q.dead),
      el('td', { class: 'num', 'data-field': 'oldest' }, age(q.oldestClaimableAgeMs)),
      el('td', { class: 'num', 'data-field': 'expiring' }, q.leasesExpiringSoon),
      el('td', { class: 'num', 'data-field': 'completed' }, q.completedInWindow),
      el('td', {}, chart(data.throughput, [q.queue])),
      el('td', { 'data-field': 'state', class: q.unattended ? 'bad' : '' },
        q.paused ? 'paused' : q.unattended ? 'no worker: work waits, none running' : '')));
  const paused = data.queues.filter((q) => q.paused).map((q) => q.queue);
  main.replaceChildren(
    el('h1', {}, 'Queues'),
    el('table', { id: 'queues' },
      el('thead', {}, el('tr', {}, ...['queue', 'pending', 'running', 'dead', 'oldest claimable', 'leases near expiry',
        'completed / min', 'throughput (last minutes)', 'state'].map((h) => el('th', {}, h)))),
      el('tbody', {}, ...rows)),
    el('p', { class: 'note' }, 'Paused queues: ' + (paused.length ? paused.join(', ') : 'none') +
      '. Updated every 2 s from lh.stats().'),
    el('h2', {}, 'Blocked ordering keys'),
    data.blockedKeys.length === 0
      ? el('p', { class: 'note', id: 'blocked-none' }, 'none: no ordering key waits behind a dead job')
      : el('table', { id: 'blocked' },
          el('thead', {}, el('tr', {}, ...['queue', 'key', 'dead head', 'blocked for', 'waiting', 'error']
            .map((h) => el('th', {}, h)))),
          el('tbody', {}, ...data.blockedKeys.map((k) =>
            el('tr', { 'data-key': k.orderingKey },
              el('td', {}, k.queue),
              el('td', {}, k.orderingKey),
              el('td', {}, el('a', { href: '/jobs/' + encodeURIComponent(k.headJobId) }, k.headJobId)),
              el('td', { class: 'num' }, age(k.blockedMs)),
              el('td', { class: 'num' }, k.waiting),
              el('td', {}, k.lastErrorCode ?? ''))))));
  statusLine.textContent = 'updated ' + time(data.at);
}

async function deadList() {
  const params = new URLSearchParams(location.search);
  const data = await getJson('/api/dead?' + params.toString());
  const form = el('form', { class: 'filters', method: 'get', action: '/dead' },
    el('input', { name: 'queue', placeholder: 'queue', value: params.get('queue') || '' }),
    el('input', { name: 'errorCode', placeholder: 'error code', value: params.get('errorCode') || '' }),
    el('button', { type: 'submit' }, 'Filter'));
  const rows = data.jobs.map((job) =>
    el('tr', { 'data-job': job.id },
      el('td', {}, el('a', { href: '/jobs/' + job.id }, job.id)),
      el('td', {}, job.queueName),
      el('td', {}, job.errorCode || ''),
      el('td', {}, (job.errorMessage || '').slice(0, 120)),
      el('td', { class: 'num', 'data-field': 'attempts' }, attempts(job.attemptCount, job.maxAttempts, job.attemptBudget)),
      el('td', {}, time(job.diedAt)),
      el('td', {},
        el('button', { class: 'replay', onclick: async () => { if (await act(job.id, 'replay')) render(); } }, 'Replay'))));
  const smaller = data.jobs.some((job) => job.attemptBudget !== null && job.attemptBudget < job.maxAttempts);
  // Optional parts are left out, not passed as null (replaceChildren would print "null").
  main.replaceChildren(el('h1', {}, 'Dead jobs'), form, el('p', {}, reasonField()),
    rows.length ? el('table', { id: 'dead' },
      el('thead', {}, el('tr', {}, ...['id', 'queue', 'error code', 'message', 'attempts', 'died', ''].map((h) => el('th', {}, h)))),
      el('tbody', {}, ...rows)) : el('p', { id: 'no-dead' }, 'No dead jobs match.'),
    ...(smaller ? [el('p', { class: 'note', id: 'budget-note' }, BUDGET_NOTE)] : []),
    ...(data.cursor ? [el('p', {}, el('a', { id: 'next-page', href: '/dead?' + new URLSearchParams({ ...Object.fromEntries(params), cursor: data.cursor }) }, 'Next page'))] : []));
}

// The payload stays hidden until asked for (as with the CLI's --payload): it may hold personal data.
let showPayload = false;

async function jobView(id) {
  const { job, flow } = await getJson('/api/jobs/' + id + (showPayload ? '?payload=1' : ''));
  if (!job) { main.replaceChildren(el('h1', {}, 'No job ' + id)); return; }
  const lastError = [job.lastErrorCode, job.lastErrorClass && '(' + job.lastErrorClass + ')', job.lastErrorMessage]
    .filter(Boolean).join(' ');
  const budget = job.status === 'dead' ? deathBudget(job.history) : null;
  const facts = [['status', job.status], ['queue', job.queueName], ['attempts', attempts(job.attemptCount, job.maxAttempts, budget)],
    ['priority', job.priority], ['available at', time(job.availableAt)], ['lease owner', job.leaseOwner],
    ['lease expires', job.leaseExpiresAt && time(job.leaseExpiresAt)], ['last error', lastError || null],
    ['created', time(job.createdAt)], ['finished', job.finishedAt && time(job.finishedAt)]];
  const history = job.history.map((e) => el('tr', { 'data-kind': e.kind },
    el('td', {}, time(e.at)), el('td', {}, e.kind), el('td', {}, e.statusAfter || ''),
    el('td', {}, e.attempt ?? ''), el('td', {}, e.owner || e.actor || ''),
    el('td', {}, eventDetail(e))));
  const actions = [];
  if (job.status === 'dead') actions.push(el('button', { class: 'replay', onclick: async () => { if (await act(job.id, 'replay')) render(); } }, 'Replay'));
  // Cancel applies to work not yet finished (a dead job is finished: replay it or leave it).
  if (job.status === 'pending' || job.status === 'running')
    actions.push(el('button', { class: 'cancel', onclick: async () => { if (await act(job.id, 'cancel')) render(); } }, 'Cancel'));
  if (actions.length) actions.push(reasonField());
  const payload = job.payloadPreview
    ? [el('h2', {}, 'Payload' + (job.payloadPreview.truncated ? ' (truncated)' : '')),
       el('pre', { id: 'payload' }, job.payloadPreview.text)]
    : [el('h2', {}, 'Payload'),
       el('p', {}, el('button', { id: 'show-payload', onclick: () => { showPayload = true; render(); } }, 'Show payload'),
         el('span', { class: 'note' }, ' hidden by default: it may hold personal data'))];
  const stack = job.lastErrorStack
    ? [el('details', { id: 'stack' }, el('summary', {}, 'Stack trace of the last error'), el('pre', {}, job.lastErrorStack))]
    : [];
  main.replaceChildren(
    el('h1', {}, 'Job ' + job.id),
    el('table', { id: 'job' }, el('tbody', {}, ...facts.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', { 'data-field': k }, v ?? '-'))))),
    ...stack,
    el('p', {}, ...actions),
    ...payload,
    el('h2', {}, 'History'),
    el('table', { id: 'history' },
      el('thead', {}, el('tr', {}, ...['at', 'event', 'status after', 'attempt', 'who', 'detail'].map((h) => el('th', {}, h)))),
      el('tbody', {}, ...history)),
    ...flowSection(flow, job.id));
}

// Flows (issue 16): the graph this job belongs to, one row per job (the first 200), its parents named.
function flowSection(flow, here) {
  if (!flow) return [];
  const rows = flow.nodes.slice(0, 200).map((n) => el('tr', { 'data-status': n.status, class: n.id === here ? 'here' : '' },
    el('td', {}, el('a', { href: '/jobs/' + n.id }, n.ref)), el('td', {}, n.status),
    el('td', {}, n.dependsOn.slice(0, 5).join(', ') + (n.dependsOn.length > 5 ? ' +' + (n.dependsOn.length - 5) : '')),
    el('td', {}, n.onParentDead)));
  return [el('h2', {}, 'Flow ' + flow.flowId + ' (' + flow.nodes.length + ' jobs)'),
    el('table', { id: 'flow' },
      el('thead', {}, el('tr', {}, ...['job', 'status', 'depends on', 'if parent dead'].map((h) => el('th', {}, h)))),
      el('tbody', {}, ...rows))];
}

async function render() {
  try {
    const path = location.pathname;
    const job = /^\\/jobs\\/(\\d+)$/.exec(path);
    if (job) await jobView(job[1]);
    else if (path === '/dead') await deadList();
    else await overview();
    document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
  } catch (err) {
    statusLine.textContent = 'error: ' + err.message;
  }
}

render();
// Live updates: the overview and the job page poll every 2 s; the dead list refreshes after actions.
if (location.pathname !== '/dead') setInterval(render, 2000);
`;
