// The dashboard's router: picks the view from the path and keeps it live by polling.
import { base, main, say } from './dom.js';
import { enqueueView } from './enqueue.js';
import { jobView } from './job.js';
import { overview } from './overview.js';
import { queueView } from './queue.js';
import { deadList, searchView } from './search.js';

// Views that refresh themselves on a timer return true; the others render once (a form keeps what
// the operator typed).
const live = new Set(['overview', 'queue', 'job']);

// The path below the base path the dashboard is mounted under ('/admin/jobs/search' -> '/search').
const path = location.pathname.slice(base.length) || '/';

function route() {
  const job = /^\/jobs\/(\d+)$/.exec(path);
  if (job) return ['job', () => jobView(job[1])];
  const queue = /^\/queues\/([^/]+)$/.exec(path);
  if (queue) return ['queue', () => queueView(decodeURIComponent(queue[1]))];
  if (path === '/dead') return ['dead', deadList];
  if (path === '/search') return ['search', searchView];
  if (path === '/enqueue') return ['enqueue', enqueueView];
  return ['overview', overview];
}

const [name, view] = route();
for (const link of document.querySelectorAll('nav a')) {
  if (link.getAttribute('href') === base + path) link.setAttribute('aria-current', 'page');
}

export async function render() {
  try {
    await view();
    document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
  } catch (err) {
    say(`error: ${err.message}`);
  }
}

window.addEventListener('leasehold:render', () => render());
render();
if (live.has(name)) setInterval(render, 2000);
main.dataset.view = name;
