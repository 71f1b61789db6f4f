// Shared helpers of the dashboard's scripts. Every value from the server is set as text
// (textContent or a text node), never parsed as HTML.

export const main = document.getElementById('main');
export const statusLine = document.getElementById('status');
export const csrf = document.body.dataset.csrf;
const csrfHeader = document.body.dataset.csrfHeader;
/** 'admin' or 'viewer' (read-only: every action is refused by the server too). */
export const role = document.body.dataset.role;
export const readOnly = role === 'viewer';
/** Where the dashboard is mounted ('' at the root, '/admin/jobs' inside an app). */
export const base = document.body.dataset.base || '';

/** A dashboard path ('/search', '/api/overview') as the browser must ask for it: under the base path. */
export function at(path) {
  return path.startsWith('/') && !path.startsWith('//') ? base + path : path;
}

/** Creates an element: attributes (onclick/onsubmit/oninput become listeners), then children. */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    // Every link and form of the page names a dashboard path: it is served under the base path.
    else if (key === 'href' || key === 'action') node.setAttribute(key, at(String(value)));
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function age(ms) {
  if (ms === null || ms === undefined) return '-';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

// One format for every time on every page: ISO 8601 in UTC, as the CLI prints them.
export function time(value) {
  return value === null || value === undefined ? '-' : new Date(value).toISOString();
}

export async function getJson(path) {
  const res = await fetch(at(path), { credentials: 'same-origin' });
  if (!res.ok) throw new Error((await res.json()).error || res.statusText);
  return res.json();
}

/** POSTs JSON with the page's CSRF token; resolves { ok, status, body }. */
export async function postJson(path, value) {
  const res = await fetch(at(path), {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', [csrfHeader]: csrf },
    body: JSON.stringify(value || {}),
  });
  let body = {};
  try {
    body = await res.json();
  } catch {}
  return { ok: res.ok, status: res.status, body };
}

/** Says something in the header's live region (read out by screen readers). */
export function say(text) {
  statusLine.textContent = text;
}

/** A labelled form control: the label names it for assistive technology and for tests. */
export function field(label, control, hint) {
  const id = control.id || `f-${control.getAttribute('name') || Math.random().toString(36).slice(2)}`;
  control.id = id;
  return el(
    'div',
    { class: 'field' },
    el('label', { for: id }, label),
    control,
    hint ? el('small', { class: 'note' }, hint) : null,
  );
}

/** Replaces `parent`'s children, leaving out null and false (replaceChildren would print "null"). */
export function fill(parent, ...children) {
  parent.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}
