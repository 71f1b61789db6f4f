// A sparkline: one small inline SVG per value series (a row of the overview's queue table), drawn
// without a charting library so fifty queues cost fifty small paths, not fifty chart instances.
// Null values (minutes nobody sampled) break the line.

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 120;
const HEIGHT = 24;

/**
 * An SVG of `values` (numbers or null, oldest first), named `label` for assistive technology; the
 * total, the peak and the count of sampled points ride in data attributes (tests, the curious).
 */
export function sparkline(kind, values, label) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', `spark spark-${kind}`);
  svg.setAttribute('viewBox', `0 0 ${WIDTH} ${HEIGHT}`);
  svg.setAttribute('width', String(WIDTH));
  svg.setAttribute('height', String(HEIGHT));
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  svg.dataset.spark = kind;
  const sampled = values.filter((v) => v !== null && v !== undefined);
  const peak = sampled.reduce((a, v) => Math.max(a, v), 0);
  svg.dataset.total = String(sampled.reduce((a, v) => a + v, 0));
  svg.dataset.peak = String(peak);
  svg.dataset.points = String(sampled.length);
  const title = document.createElementNS(SVG, 'title');
  title.textContent = label;
  svg.append(title);
  const step = values.length > 1 ? WIDTH / (values.length - 1) : WIDTH;
  const y = (v) => (HEIGHT - 2 - (peak > 0 ? (v / peak) * (HEIGHT - 4) : 0)).toFixed(1);
  let run = [];
  const flush = () => {
    if (run.length === 0) return;
    // A lone sampled minute is drawn as a short dash, so it shows.
    const points = run.length === 1 ? [run[0], [run[0][0] + 2, run[0][1]]] : run;
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', points.map(([x, v]) => `${x.toFixed(1)},${v}`).join(' '));
    svg.append(line);
    run = [];
  };
  values.forEach((v, i) => {
    if (v === null || v === undefined) flush();
    else run.push([i * step, y(v)]);
  });
  flush();
  return svg;
}
