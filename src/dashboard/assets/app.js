// The dashboard's router: picks the view from the path and keeps it live by polling.
import { main, say } from './dom.js';
import { enqueueView } from './enqueue.js';
import { jobView } from './job.js';
import { overview } from './overview.js';
import { deadList, searchView } from './search.js';

// Views that refresh themselves on a timer return true; the others render once (a form keeps what
// the operator typed).
const live = new Set(['overview', 'job']);

function route() {
  const path = location.pathname;
  const job = /^\/jobs\/(\d+)$/.exec(path);
  if (job) return ['job', () => jobView(job[1])];
  if (path === '/dead') return ['dead', deadList];
  if (path === '/search') return ['search', searchView];
  if (path === '/enqueue') return ['enqueue', enqueueView];
  return ['overview', overview];
}

const [name, view] = route();
for (const link of document.querySelectorAll('nav a')) {
  if (link.getAttribute('href') === location.pathname) link.setAttribute('aria-current', 'page');
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
